#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/profiler/host_profiler.hpp"

// What the decoding loop asks of a backend: the model's operations on batches of token rows.
// The loop owns the scheduling, exits, strategies and row bookkeeping (which tokens run which
// layer, pending states, depth-wise flights); a backend owns the weights, the arithmetic and the
// memory it computes in. Hidden states stay in the backend's store (hidden_states.hpp): the loop
// names them by slot, so a device backend moves them to the host only where the loop needs a
// decision there (logits, router scores). K/V rows live at the slots the KvCache's bookkeeping
// gives them; a device backend keeps their values on the device (sync_kv copies them back).
namespace exitsim::engine {

// One query row of a layer call: a token of some sequence at some position.
struct LayerRow {
  std::int32_t position = 0;  // rotary position; attends to rows at positions <= this
  int read_stream = -1;       // the K/V stream its attention reads
  // The stream its K/V is appended to before attention (so rows of one call see each other
  // causally). -1: its K/V is not kept (shared_kv's reuse of recursion 1, whose stream already
  // holds the token, or a probe, which attends to its own K/V without storing it).
  int write_stream = -1;
  bool probe = false;
  // Depth-wise batching mixes recursions in one call of the shared block: the recursion whose
  // LoRA this row uses. -1: the layer's own.
  int recursion = -1;
  // Consecutive rows with the same chunk id >= 0 are one prompt chunk of one sequence: their
  // projections run as one matrix-matrix product. Other rows (decode tokens) run through the
  // batch-invariant kernel (see linear.hpp).
  int chunk = -1;
};

// Where a layer call records its ops (norms, projections, rotary, K/V writes, attention, MLP)
// as host spans; no profiler: nothing is recorded.
struct OpProfile {
  profiler::HostProfiler* profiler = nullptr;
  std::uint64_t step = 0;  // the engine iteration, for the spans' step id
};

// The calibration features of one layer call, as every backend records them: its rows, and the
// (query, key) pairs attention reads as the simulator counts them — a row sees the cached rows
// up to its position, the earlier rows of its own chunk (not cached yet: K/V are stored during
// the call) and itself.
profiler::SpanShape layer_call_shape(int layer, int recursion, std::span<const LayerRow> rows,
                                     const KvCache& kv, std::uint64_t step);

// Where an executed layer of the unrolled model comes from.
struct LayerSource {
  int unique_layer = 0;  // index into ModelWeights::layers
  int recursion = 0;     // 1-based within the shared block; 0 in the prelude and coda
};

// The unrolled stack's layer `executed_layer` in a model of this depth structure: prelude layers,
// then the block's layers once per recursion, then the coda.
LayerSource layer_source(const DepthStructure& depth, int executed_layer);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // The machine it runs on, as a cost profile names it ("<CPU model> x <n> threads", "<GPU>"):
  // a profile measured here prices only this hardware.
  virtual std::string hardware() const = 0;
  virtual const ModelConfig& config() const = 0;
  // Where executed layer `layer` (prelude, every recursion of the block, coda) comes from.
  virtual LayerSource source_of(int layer) const = 0;
  virtual std::size_t router_count() const = 0;

  // A store for the hidden states this backend computes on.
  virtual std::unique_ptr<HiddenStates> make_states() const = 0;
  // Writes the tokens' embeddings into the slots `into` (one per token). Throws
  // std::out_of_range for an id outside the vocabulary.
  virtual void embed(std::span<const std::int32_t> tokens, HiddenStates& states,
                     std::span<const StateSlot> into) const = 0;
  // Runs executed layer `layer` over the hidden states in `slots` (row i of `rows` describes
  // slots[i]) in place: each row's K/V is appended to its write stream first, then it attends to
  // its read stream's rows at positions <= its own.
  virtual void layer(int layer, HiddenStates& states, std::span<const StateSlot> slots,
                     std::span<const LayerRow> rows, KvCache& kv,
                     const OpProfile& profile = {}) const = 0;
  // state_copy: appends to each row's write stream the K and V that `layer` computes from the
  // state in its slot (input norm, K/V projections, rotary), without running the layer.
  virtual void kv_only(int layer, const HiddenStates& states, std::span<const StateSlot> slots,
                       std::span<const LayerRow> rows, KvCache& kv,
                       const OpProfile& profile = {}) const = 0;
  // Final norm and LM head: one row of logits per slot, on the host.
  virtual Matrix logits(const HiddenStates& states, std::span<const StateSlot> slots) const = 0;
  // Final norm, LM head and each row's top-2 summary (argmax, its probability, the margin over
  // the runner-up) — what greedy decoding and confidence exits read — without the logits.
  // Without `probabilities` only the argmax is needed: a backend may leave the two
  // probabilities NaN rather than compute the softmax.
  virtual std::vector<Top2Confidence> top2(const HiddenStates& states,
                                           std::span<const StateSlot> slots,
                                           bool probabilities) const = 0;
  // Recursion r's router score (1-based r) for the state in each slot, in [0, 1].
  virtual std::vector<double> router_scores(int recursion, const HiddenStates& states,
                                            std::span<const StateSlot> slots) const = 0;
  // Brings the K and V values of the host KvCache up to date (a device backend computes them on
  // the device; the CPU backend writes them into the KvCache itself).
  virtual void sync_kv(KvCache& kv) const { (void)kv; }
  // Whether the KvCache's own storage holds the K/V the layers read, so that its host tier can
  // swap them (swap preemption); a device backend reads a device copy of the pool.
  virtual bool kv_in_host_cache() const { return true; }

  const DepthStructure& depth() const { return config().shape.depth; }
  int executed_layers() const { return depth().full_depth(); }
  std::int64_t kv_width() const { return config().shape.n_kv_heads * config().shape.head_dim; }
};

}  // namespace exitsim::engine
