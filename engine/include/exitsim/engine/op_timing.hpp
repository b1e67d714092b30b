#pragma once
// Engine ops timed in isolation, the way Vidur profiles an engine: each op of a layer call (and
// the K/V-only projections, the embedding and the LM head) at a chosen shape — batch tokens x
// attention context — repeated after warm-up, keeping every repetition so that a point's median
// and spread are known. `exitsim engine profile-ops` walks a grid of such points; the speed probe
// is one fixed point, timed at the start and end of every calibration and validation run.

#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::engine {

// How a layer call's rows look: `decode` is `batch_tokens` sequences of one token each, every one
// with `context_per_row` cached tokens before it; `prefill` is one prompt chunk of `batch_tokens`
// tokens after `context_per_row` cached ones (matrix-matrix projections, causal attention inside
// the chunk). The engine's prefill pass mixes both; its decode pass is the first.
enum class CallShape : std::uint8_t { decode, prefill };
const char* to_string(CallShape shape);

struct OpGridPoint {
  CallShape shape = CallShape::decode;
  std::int64_t batch_tokens = 1;
  std::int64_t context_per_row = 0;
};

struct OpTimingOptions {
  int warmup = 3;        // untimed calls first (caches, page faults, OpenMP's thread start)
  int repetitions = 15;  // timed calls
  // The executed layer timed (its weights, LoRA and K/V stream); -1: the first layer of the
  // shared block (the first layer when the model has no block).
  int layer = -1;
};

// One op at one point: every repetition's time.
struct OpTiming {
  std::string op;  // as in engine_ops.hpp
  traces::OpKind kind = traces::OpKind::other;
  CallShape shape = CallShape::decode;
  int layer = 0;
  int recursion = 0;
  std::int64_t batch_tokens = 0;
  std::int64_t context_tokens = 0;  // (query, key) pairs attention reads, as op traces count them
  std::vector<double> times_us;     // one per repetition, in the order taken

  double median_us() const;
  // Nearest-rank percentile of the repetitions, p in [0, 1].
  double percentile_us(double p) const;
};

// Times every op a layer call records (attn_norm ... mlp.down), then state_copy.kv_proj, embed and
// lm_head at `point`. Throws InputError (key `--batch-tokens`/`--contexts`) for a point the model
// cannot hold (context beyond its positions, an empty batch).
std::vector<OpTiming> time_ops(const Backend& backend, const OpGridPoint& point,
                               const OpTimingOptions& options = {});

// A fixed, short reference workload: one whole decode layer call of 8 sequences at 64 cached
// tokens, timed after k_probe_warmup_ms of untimed calls in k_probe_blocks blocks of
// k_probe_calls_per_block calls, k_probe_gap_ms apart; the reading is the median of the blocks'
// medians (p10/p90: of the blocks). Two readings on the same
// machine and thread setting should agree within its noise; when they do not, the machine is
// busier (or faster) than when the other was taken.
inline constexpr int k_probe_warmup_ms = 150;
inline constexpr int k_probe_blocks = 9;
inline constexpr int k_probe_calls_per_block = 12;
inline constexpr int k_probe_gap_ms = 15;
struct SpeedProbe {
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
};
SpeedProbe speed_probe(const Backend& backend);

}  // namespace exitsim::engine
