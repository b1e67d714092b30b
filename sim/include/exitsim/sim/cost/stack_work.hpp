#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"

namespace exitsim::sim {

// Batch aggregates that every op's FLOPs and bytes are linear in. One vector describes the batch
// one layer sees (the entries whose work reaches it).
enum class BatchFeature : std::uint8_t {
  tokens,            // T: query tokens of all entries running the full layer
  decode_seqs,       // entries with one query token
  decode_kv,         // sum over decode entries of (context + 1): K/V tokens their attention reads
  prefill_tokens,    // query tokens of entries with more than one
  prefill_pairs,     // sum over prefill entries of q*c + q(q+1)/2: causal (query, key) pairs
  prefill_kv,        // sum over prefill entries of (c + q): K/V tokens their attention reads
  emitting,          // entries whose last token produces an output token
  kv_only_tokens,    // tokens running only the K/V projections here (state_copy)
  kv_only_alone,     // 1 when the layer runs K/V-only tokens and no others: their weights are read
  kv_reuse_tokens,   // query tokens reusing recursion 1's K/V here (shared_kv): no K/V GEMM
  kv_reuse_decode,   // decode entries among them: decode attention writes no K/V for them
  kv_reuse_prefill,  // prefill tokens among them: prefill attention writes no K/V for them
  kv_reuse_all,      // 1 when every token here reuses: the K/V weights are not read
  never,             // always 0: the launch condition of an op a layer lacks (a dense layer's
                     // router in a mixture)
};
inline constexpr std::size_t k_batch_feature_count = 16;  // padded for vectorisation
using BatchFeatures = std::array<double, k_batch_feature_count>;

constexpr std::size_t feature_index(BatchFeature f) {
  return static_cast<std::size_t>(f);
}

// Integer sums of the features over a group of entries at one layer: exact, so sums and
// differences in any order give the same features. No member initialisers, so scratch arrays of
// them are not zeroed: write `WorkCounts c{}` for an empty sum.
struct WorkCounts {
  std::int64_t tokens;
  std::int64_t decode_seqs;
  std::int64_t decode_kv;
  std::int64_t prefill_tokens;
  std::int64_t prefill_pairs;
  std::int64_t prefill_kv;
  std::int64_t kv_only_tokens;
  std::int64_t reuse_decode;
  std::int64_t reuse_prefill;

  // q query tokens attending over c earlier tokens, running the full layer (sign -1 removes
  // them).
  void add_queries(std::int64_t q, std::int64_t c, std::int64_t sign = 1) {
    const bool decode = q == 1;
    tokens += sign * q;
    decode_seqs += decode ? sign : 0;
    decode_kv += decode ? sign * (c + 1) : 0;
    prefill_tokens += decode ? 0 : sign * q;
    prefill_pairs += decode ? 0 : sign * (q * c + q * (q + 1) / 2);
    prefill_kv += decode ? 0 : sign * (c + q);
  }
  // The same queries as a windowed layer sees them: decode_kv, prefill_pairs and prefill_kv
  // count the keys of `window` (AttentionWindow::keys_at, keys_before, kv_span), not the whole
  // context.
  void add_windowed_queries(std::int64_t q, std::int64_t c, const AttentionWindow& window,
                            std::int64_t sign = 1) {
    const bool decode = q == 1;
    tokens += sign * q;
    decode_seqs += decode ? sign : 0;
    decode_kv += decode ? sign * window.keys_at(c) : 0;
    prefill_tokens += decode ? 0 : sign * q;
    prefill_pairs += decode ? 0 : sign * (window.keys_before(c + q) - window.keys_before(c));
    prefill_kv += decode ? 0 : sign * window.kv_span(c, q);
  }
  void add(const BatchEntry& e) { add_queries(e.query_tokens, e.context_tokens); }
  void add(const WorkCounts& o) {
    tokens += o.tokens;
    decode_seqs += o.decode_seqs;
    decode_kv += o.decode_kv;
    prefill_tokens += o.prefill_tokens;
    prefill_pairs += o.prefill_pairs;
    prefill_kv += o.prefill_kv;
    kv_only_tokens += o.kv_only_tokens;
    reuse_decode += o.reuse_decode;
    reuse_prefill += o.reuse_prefill;
  }
  void subtract(const WorkCounts& o) {
    tokens -= o.tokens;
    decode_seqs -= o.decode_seqs;
    decode_kv -= o.decode_kv;
    prefill_tokens -= o.prefill_tokens;
    prefill_pairs -= o.prefill_pairs;
    prefill_kv -= o.prefill_kv;
    kv_only_tokens -= o.kv_only_tokens;
    reuse_decode -= o.reuse_decode;
    reuse_prefill -= o.reuse_prefill;
  }
  // No op of the layer launches for an empty group.
  bool empty() const { return tokens == 0 && kv_only_tokens == 0; }
  BatchFeatures features() const;  // emitting left 0: the head sets it

  friend bool operator==(const WorkCounts&, const WorkCounts&) = default;
};

inline BatchFeatures WorkCounts::features() const {
  BatchFeatures x{};
  x[feature_index(BatchFeature::tokens)] = static_cast<double>(tokens);
  x[feature_index(BatchFeature::decode_seqs)] = static_cast<double>(decode_seqs);
  x[feature_index(BatchFeature::decode_kv)] = static_cast<double>(decode_kv);
  x[feature_index(BatchFeature::prefill_tokens)] = static_cast<double>(prefill_tokens);
  x[feature_index(BatchFeature::prefill_pairs)] = static_cast<double>(prefill_pairs);
  x[feature_index(BatchFeature::prefill_kv)] = static_cast<double>(prefill_kv);
  x[feature_index(BatchFeature::kv_only_tokens)] = static_cast<double>(kv_only_tokens);
  x[feature_index(BatchFeature::kv_only_alone)] = kv_only_tokens > 0 && tokens == 0 ? 1 : 0;
  const std::int64_t reuse = reuse_decode + reuse_prefill;
  x[feature_index(BatchFeature::kv_reuse_tokens)] = static_cast<double>(reuse);
  x[feature_index(BatchFeature::kv_reuse_decode)] = static_cast<double>(reuse_decode);
  x[feature_index(BatchFeature::kv_reuse_prefill)] = static_cast<double>(reuse_prefill);
  x[feature_index(BatchFeature::kv_reuse_all)] = tokens > 0 && reuse == tokens ? 1 : 0;
  return x;
}

// Recursions whose context the entry overrides (recursion_context_count, at most
// k_max_recursion_contexts).
inline int recursion_context_overrides(const BatchEntry& e) {
  return std::min<int>(e.recursion_context_count, static_cast<int>(k_max_recursion_contexts));
}

// The 0-based, half-open layer ranges of one entry's stack work, clamped to the stack.
struct EntrySpan {
  int start;         // first layer run in full
  int pending_from;  // first layer the pending tokens join (depth when there are none)
  int useful;        // first masked layer (depth when none is masked)
  int depth;         // end of the layers run in full
  int kv_end;        // end of the K/V-only layers that follow them
};

// What a batch entry does at each layer of the unrolled stack: the one definition of the
// synchronization fields of BatchEntry, shared by the fast path and the per-layer reference.
class StackLayout {
 public:
  static constexpr std::size_t k_max_breakpoints = 16;
  using Breakpoints = std::array<int, k_max_breakpoints>;

  StackLayout() = default;
  explicit StackLayout(const DepthStructure& depth);

  int stacked_depth() const { return static_cast<int>(recursion_of_layer_.size()); }
  // The 0-based layer range [begin, end) of recursion 1; both are the stacked depth on a plain
  // model.
  int first_recursion_begin() const { return first_recursion_begin_; }
  int first_recursion_end() const { return first_recursion_end_; }
  // Recursions of the shared block, and the first layer (0-based) of recursion r (1-based).
  int recursions() const { return static_cast<int>(recursion_begin_.size()); }
  int recursion_begin(int r) const { return recursion_begin_[static_cast<std::size_t>(r - 1)]; }
  // Recursion (1-based) of a 0-based stack layer; 0 in the prelude.
  int recursion_of_layer(int layer) const {
    return recursion_of_layer_[static_cast<std::size_t>(layer)];
  }
  EntrySpan span_of(const BatchEntry& e) const;
  // Entry e's work at a 0-based stack layer: its queries running the full layer (with the context
  // of that layer's recursion, the pending tokens joined and without K/V projections where it
  // reuses them), its K/V-only tokens, or nothing. With `window`, as a windowed layer sees the
  // queries (WorkCounts::add_windowed_queries).
  WorkCounts work_at(const BatchEntry& e, const EntrySpan& s, int layer,
                     const AttentionWindow* window = nullptr) const;
  // The part of work_at that is masked.
  WorkCounts masked_at(const BatchEntry& e, const EntrySpan& s, int layer,
                       const AttentionWindow* window = nullptr) const;
  // Sorted distinct layers in [s.start, s.kv_end] at which work_at or masked_at may change (they
  // are constant between consecutive ones, and nothing from the last one on). Returns the count.
  std::size_t breakpoints(const BatchEntry& e, const EntrySpan& s, Breakpoints& out) const;

 private:
  std::vector<int> recursion_of_layer_;
  std::vector<int> recursion_begin_;  // [r - 1]: first layer of recursion r
  int first_recursion_begin_ = 0;
  int first_recursion_end_ = 0;
};

// Inline: the fast path calls these per entry that is off the plain path.
inline EntrySpan StackLayout::span_of(const BatchEntry& e) const {
  EntrySpan s;
  s.depth = std::clamp(e.depth, 0, stacked_depth());
  s.start = std::clamp(e.start_depth, 0, s.depth);
  s.pending_from =
      e.pending_tokens > 0 ? std::clamp(e.pending_from_depth, s.start, s.depth) : s.depth;
  s.useful = std::clamp(e.useful_depth, s.start, s.depth);
  s.kv_end = std::clamp(e.kv_only_depth, s.depth, stacked_depth());
  return s;
}

inline WorkCounts StackLayout::work_at(const BatchEntry& e, const EntrySpan& s, int layer,
                                       const AttentionWindow* window) const {
  WorkCounts w{};
  if (layer >= s.start && layer < s.depth) {
    const int r = recursion_of_layer(layer);
    std::int64_t q = e.query_tokens;
    std::int64_t c = r >= 1 && r <= recursion_context_overrides(e)
                         ? e.recursion_context[static_cast<std::size_t>(r - 1)]
                         : e.context_tokens;
    if (layer >= s.pending_from) {
      q += e.pending_tokens;
      c = std::max<std::int64_t>(c - e.pending_tokens, 0);
    }
    if (window != nullptr)
      w.add_windowed_queries(q, c, *window);
    else
      w.add_queries(q, c);
    if (e.reuse_first_recursion_kv && r >= 2) {
      w.reuse_decode = w.decode_seqs;
      w.reuse_prefill = w.prefill_tokens;
    }
  } else if (layer >= s.depth && layer < s.kv_end) {
    w.kv_only_tokens = e.query_tokens;
  }
  return w;
}

inline WorkCounts StackLayout::masked_at(const BatchEntry& e, const EntrySpan& s, int layer,
                                         const AttentionWindow* window) const {
  if (layer >= s.useful && layer < s.depth)
    return work_at(e, s, layer, window);
  return WorkCounts{};
}

// The batch every stack layer sees, and what the coda, the embedding and the head see: the one
// aggregation batch -> layers -> WorkCounts of the measured cost models (calibrated, table).
// Each entry's work (StackLayout::work_at) is added at each of its breakpoints and removed at the
// next, into a difference array over the layers, so that reading the layers in order gives each
// one's batch as a running sum. (The roofline sums the same work per group of layers:
// add_stack_by_sweep, and its one-pass shortcut.) Kept between iterations, which then allocate
// nothing.
class LayerBatches {
 public:
  // Empty, for a stack of `layers` layers.
  void clear(int layers);
  // Adds entry `e` (with query tokens) and returns its span.
  EntrySpan add(const StackLayout& layout, const BatchEntry& e);
  bool empty() const { return !used_; }
  // Adds the next layer's change to `running`, which then holds that layer's batch: layers 0,
  // 1, ... in order, each once, from an empty `running`. (The caller keeps the sum: held here,
  // calibrated_decode/1 on cost_model_bench was 1.3x slower.)
  void next_layer(WorkCounts& running) {
    running.add(delta_[next_]);
    delta_[next_++] = WorkCounts{};
  }

  WorkCounts coda{};          // the entries that run the coda (runs_coda), as one group
  std::int64_t embedded = 0;  // query tokens of entries that start at layer 1
  std::int64_t emitting = 0;  // entries that emit a token

 private:
  std::vector<WorkCounts> delta_;  // [l]: layer l's batch minus layer l - 1's
  std::size_t next_ = 0;
  bool used_ = false;
};

}  // namespace exitsim::sim
