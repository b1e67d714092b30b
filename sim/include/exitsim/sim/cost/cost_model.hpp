#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// Recursions whose attention context an entry can override (BatchEntry::recursion_context).
inline constexpr std::size_t k_max_recursion_contexts = 8;

// What an iteration's price covers (cost_model.timing_scope; docs/cost_model.md, "Timing
// scope"). whole_step: every op the step runs. block_only: only the layers of the recursion
// block (prelude_layers+1 .. stacked_depth; every layer of a plain model), as
// Mixture-of-Recursions' throughput was timed: no embedding, prelude or coda layers, LM head,
// sampling or exit probes. A block-only price is not a step time.
enum class TimingScope : std::uint8_t { whole_step, block_only };
// "whole_step" or "block_only" (the scenario's spelling); throws InputError naming
// cost_model.timing_scope for anything else.
TimingScope timing_scope_from(const std::string& name);
// The first stack layer (0-based) a block-only timing prices: the recursion block's first, or
// 0 for a model without recursions (its whole stack is its block).
inline int block_only_first_layer(const DepthStructure& depth) {
  return depth.is_recursive() ? depth.prelude_layers : 0;
}
// The run's note for a block-only scope (one line, for the warnings); empty for whole_step.
std::string timing_scope_note(TimingScope scope, const std::string& cost_model);

// One sequence's share of an iteration, as the cost model prices it. Layers are counted 1-based
// in the unrolled prelude + recursion stack; a range "a+1..b" is empty when b <= a. Only the first
// four fields matter for a full-depth or plain early-exit entry; the rest describe the extra or
// skipped work of the synchronization strategies (docs/cost_model.md, "Synchronization work") and
// default to "none".
struct BatchEntry {
  std::int64_t query_tokens = 0;    // tokens processed now (1 for decode, a chunk for prefill)
  std::int64_t context_tokens = 0;  // tokens already in K/V before this iteration
  // Layers of the unrolled stack these tokens run (dynamic depth; the full depth for static
  // models). The coda layers and the final norm run for every token whatever its depth (later
  // tokens attend over the coda's K/V); the LM head and sampling only for entries that emit.
  int depth = 0;
  bool emits_token = false;  // whether this entry's last token produces an output token

  // Layers 1..start_depth are not run: the entry runs start_depth+1..depth. An entry that starts
  // mid-stack continues tokens that went through the coda when they exited, so by default it runs
  // neither the coda nor the final norm (the LM head still runs when it emits).
  int start_depth = 0;
  // Whether the query tokens run the coda layers and the final norm. `from_start`: exactly when
  // the entry starts at layer 1. Depth-wise batching says it per step: a token runs them only in
  // the step its coda and head run, which may be a later step than the one it left the block.
  enum class Coda : std::uint8_t { from_start, run, skip };
  Coda coda = Coda::from_start;
  // deferred_fill: hidden states of this sequence left pending by earlier shallow exits. They are
  // the last `pending_tokens` of `context_tokens` and join this entry's query at layers
  // pending_from_depth+1..depth, where the entry attends as one call of query_tokens +
  // pending_tokens queries over context_tokens - pending_tokens earlier tokens (filling their
  // K/V). They run neither the coda nor the LM head.
  std::int64_t pending_tokens = 0;
  int pending_from_depth = 0;
  // state_copy: layers depth+1..kv_only_depth compute only the K and V projections of the copied
  // exit hidden state (and write that K/V); no Q, attention, O or MLP.
  int kv_only_depth = 0;
  // batch_sync: layers useful_depth+1..depth run (and are timed) but their result is discarded;
  // their FLOPs are reported as IterationCost::masked_flops. Values >= depth mean none.
  int useful_depth = std::numeric_limits<int>::max();
  // shared_kv: at recursions >= 2 the K/V of recursion 1 are reused, so those layers compute
  // neither K/V projections nor K/V writes for this entry (attention still reads the context).
  bool reuse_first_recursion_kv = false;
  // skip_kv: at recursion r (1-based, r <= recursion_context_count) attention runs over
  // recursion_context[r - 1] earlier tokens instead of context_tokens; the prelude, the coda
  // and later recursions use context_tokens. 32-bit to keep the entry small (the per-entry loop
  // reads every entry).
  std::uint8_t recursion_context_count = 0;
  std::array<std::int32_t, k_max_recursion_contexts> recursion_context{};
};

inline bool runs_coda(const BatchEntry& e) {
  return e.coda == BatchEntry::Coda::from_start ? e.start_depth <= 0
                                                : e.coda == BatchEntry::Coda::run;
}

// Time of each part of one iteration (the critical path and what lies on it), for metrics and
// timelines.
struct IterationCost {
  TimeNs total = 0;          // critical path of the iteration's op graph
  TimeNs compute_bound = 0;  // part of `total` spent in ops limited by FLOP/s
  TimeNs memory_bound = 0;   // part limited by memory bandwidth
  TimeNs overhead = 0;       // kernel-launch overhead on the critical path
  TimeNs communication = 0;  // part spent in tensor-parallel collectives (their link time)
  double flops = 0;          // executed FLOPs (all ops)
  double bytes = 0;          // bytes moved (all ops)
  // Part of `flops` spent on layers above an entry's useful depth (batch_sync's masked riders):
  // executed and timed, but wasted.
  double masked_flops = 0;
};

// Prices one iteration of a replica. Implementations: roofline (from hardware and model specs)
// and, later, calibrated (from op traces). The simulator calls this once per iteration, so
// implementations precompute everything that does not depend on the batch.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  virtual IterationCost iteration_cost(std::span<const BatchEntry> batch) const = 0;
  // Where its prices are not measurements of the work priced (an op priced by a stand-in, a
  // batch beyond the calibrated or tabulated range), one line each for the run's warnings; read
  // after the run, so counts cover every iteration priced so far.
  virtual std::vector<std::string> notes() const { return {}; }
  // The measured spread of steps around their price (CostProfile::step_variability); empty for a
  // model that prices without one.
  virtual std::span<const double> step_variability() const { return {}; }
};

}  // namespace exitsim::sim
