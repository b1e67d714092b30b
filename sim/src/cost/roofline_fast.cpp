// The roofline's shortcuts for the stack: its layer groups from one pass over the batch, with
// shortcuts for the usual entry shapes of the synchronization strategies
// (add_stack_by_boundaries). Each gives the doubles of the general pricing in roofline.cpp (the
// reference, which tests/sim/cost_sync_reference_test.cpp holds every shortcut to) with less work
// (docs/cost_model.md, "Speed"), and is kept because cost_model_bench shows it pays: a "measured"
// figure is the benchmark's time without the shortcut over its time with it (same binary, 3
// alternated runs, on a shared 2-core VM). The other shortcuts, the price cache and counting by
// launch class, are in roofline_cache.cpp.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "exitsim/sim/cost/roofline.hpp"
#include "roofline_price.hpp"

namespace exitsim::sim {

// ---- The stack's layer groups from one pass over the batch -------------------------------------

namespace {

// Distinct boundary layers one pass holds; a batch with more takes the sweep.
constexpr std::size_t k_boundary_slots = 32;

// An entry whose stack work is its queries running layers 1..depth with its own context: the
// common case, summed per run of consecutive entries at one depth.
bool plain_run(const BatchEntry& e) {
  return e.start_depth <= 0 && e.pending_tokens <= 0 && e.recursion_context_count == 0 &&
         !e.reuse_first_recursion_kv && e.coda == BatchEntry::Coda::from_start;
}

// The sums of a run of consecutive plain entries at one depth: only the features they touch.
// The same sums as WorkCounts::add_queries (tests/sim/cost_sync_reference_test.cpp holds them
// alike), kept apart so that a run adds seven counts, not nine.
struct PlainRunSums {
  std::int64_t tokens;
  std::int64_t decode_seqs;
  std::int64_t decode_kv;
  std::int64_t prefill_tokens;
  std::int64_t prefill_pairs;
  std::int64_t prefill_kv;
  // state_copy's exited tokens: K/V-only from their depth to the top of the stack.
  std::int64_t kv_to_top;

  void add(const BatchEntry& e) {
    const std::int64_t q = e.query_tokens;
    const std::int64_t c = e.context_tokens;
    const bool decode = q == 1;
    tokens += q;
    decode_seqs += decode ? 1 : 0;
    decode_kv += decode ? c + 1 : 0;
    prefill_tokens += decode ? 0 : q;
    prefill_pairs += decode ? 0 : q * c + q * (q + 1) / 2;
    prefill_kv += decode ? 0 : c + q;
  }
  WorkCounts counts() const {
    WorkCounts w{};
    w.tokens = tokens;
    w.decode_seqs = decode_seqs;
    w.decode_kv = decode_kv;
    w.prefill_tokens = prefill_tokens;
    w.prefill_pairs = prefill_pairs;
    w.prefill_kv = prefill_kv;
    return w;
  }
};

// The plain entries whose work ends at one depth (they run layers 1..depth): suffix sums over
// the depths give each layer's batch. And the K/V-only tokens of those that go on so to the top
// (state_copy), which join the batch here.
struct EndsAtDepth {
  int depth;
  WorkCounts counts;
  std::int64_t kv_to_top;

  void clear() {
    counts = WorkCounts{};
    kv_to_top = 0;
  }
};

// Signed changes, at one layer boundary, of the batch and of its masked part: the work of
// entries that is not a plain run from layer 1 (mid-stack starts, joining pending tokens,
// per-recursion contexts and K/V reuse, K/V-only layers, masked layers).
struct ChangeAtBoundary {
  int depth;
  WorkCounts run;
  WorkCounts masked;

  void clear() {
    run = WorkCounts{};
    masked = WorkCounts{};
  }
};

// A fixed-capacity map from boundary layer to a slot of sums (boundaries are few: the exit
// points). sort() orders slot indices by depth, not the slots. Slots are left uninitialised
// until used.
template <class Slot>
struct BoundaryTable {
  std::array<int, k_boundary_slots> depths;
  std::array<Slot, k_boundary_slots> slots;
  std::array<std::uint8_t, k_boundary_slots> order;  // after sort(): slot indices by depth
  std::size_t used = 0;

  // nullptr when full.
  Slot* find(int depth) {
    // Depths are distinct, so at most one matches: a scan without an early exit.
    std::size_t found = used;
    for (std::size_t i = 0; i < used; ++i)
      found = depths[i] == depth ? i : found;
    if (found < used)
      return &slots[found];
    if (used == k_boundary_slots)
      return nullptr;
    depths[used] = depth;
    Slot& slot = slots[used++];
    slot.clear();
    slot.depth = depth;
    return &slot;
  }
  // Depths are distinct, so each slot's rank is the count of smaller depths.
  void sort() {
    for (std::size_t i = 0; i < used; ++i) {
      std::size_t rank = 0;
      for (std::size_t j = 0; j < used; ++j)
        rank += depths[j] < depths[i] ? 1U : 0U;
      order[rank] = static_cast<std::uint8_t>(i);
    }
  }
  // The i-th slot by depth, after sort().
  Slot& sorted(std::size_t i) { return slots[order[i]]; }
};

// The changes of the batch at layer boundaries: the work of entries that is not a plain run from
// layer 1. Those at layer 0 only set the batch the walk starts from, so they are summed apart
// (no slot to find, no boundary to walk over).
struct BatchChanges {
  BoundaryTable<ChangeAtBoundary> at_boundary;
  WorkCounts at_first_layer{};
};

// Adds plus - minus at layer `depth` to the run (masked == false) or masked part of the changes.
// False when the slots are full. measured: without this file's inlining attributes (and
// price_window's), cost_model_bench skip_kv_recursive took 1.59x and deferred_fill 1.15x the
// time of the build before the split (1.02x and 1.04x with them).
[[gnu::always_inline]] inline bool add_change(BatchChanges& changes, int depth,
                                              const WorkCounts& plus, const WorkCounts& minus,
                                              bool masked) {
  WorkCounts change = plus;
  change.subtract(minus);
  if (depth == 0 && !masked) {
    changes.at_first_layer.add(change);
    return true;
  }
  ChangeAtBoundary* slot = changes.at_boundary.find(depth);
  if (slot == nullptr)
    return false;
  (masked ? slot->masked : slot->run).add(change);
  return true;
}

// state_copy's K/V-only layers and batch_sync's masked layers of an entry that otherwise runs
// layers 1..depth plainly. False when the slots are full. Inlined: see add_change.
[[gnu::always_inline]] inline bool add_side_work(const BatchEntry& e, int depth, int stacked_depth,
                                                 BatchChanges& changes) {
  const int kv_end = std::min(e.kv_only_depth, stacked_depth);
  if (kv_end > depth) {
    ChangeAtBoundary* from = changes.at_boundary.find(depth);
    ChangeAtBoundary* to = changes.at_boundary.find(kv_end);
    if (from == nullptr || to == nullptr)
      return false;
    from->run.kv_only_tokens += e.query_tokens;
    to->run.kv_only_tokens -= e.query_tokens;
  }
  const int useful = std::max(e.useful_depth, 0);
  if (useful < depth) {
    ChangeAtBoundary* from = changes.at_boundary.find(useful);
    ChangeAtBoundary* to = changes.at_boundary.find(depth);
    if (from == nullptr || to == nullptr)
      return false;
    from->masked.add_queries(e.query_tokens, e.context_tokens, 1);
    to->masked.add_queries(e.query_tokens, e.context_tokens, -1);
  }
  return true;
}

// Any entry, as the changes of its work at each of its breakpoints (StackLayout, the general
// definition). False when the slots are full.
bool add_entry_work(const StackLayout& layout, const BatchEntry& e, BatchChanges& changes) {
  const EntrySpan s = layout.span_of(e);
  StackLayout::Breakpoints points;
  const std::size_t n = layout.breakpoints(e, s, points);
  const bool any_masked = s.useful < s.depth;
  WorkCounts run_before{};
  WorkCounts masked_before{};
  for (std::size_t i = 0; i < n; ++i) {
    const int layer = points[i];
    const WorkCounts run = layout.work_at(e, s, layer);
    if (run != run_before && !add_change(changes, layer, run, run_before, false))
      return false;
    run_before = run;
    if (any_masked) {
      const WorkCounts masked = layout.masked_at(e, s, layer);
      if (masked != masked_before && !add_change(changes, layer, masked, masked_before, true))
        return false;
      masked_before = masked;
    }
  }
  return true;
}

// Entry-shape shortcuts: the usual entries of three synchronization strategies, as the same
// changes add_entry_work gives them, in the same order, without finding and sorting breakpoints.

// deferred_fill's usual entry: from layer 1, its queries alone below the layer its pending
// tokens join and with them from there to its depth; nothing else (breakpoints 0, the join
// layer and the depth). measured: deferred_fill 1.50x slower without.
bool fill_shape(const BatchEntry& e, int depth) {
  return e.start_depth <= 0 && e.pending_tokens > 0 && e.recursion_context_count == 0 &&
         e.coda == BatchEntry::Coda::from_start && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth && depth > 0;
}

bool add_fill_work(const BatchEntry& e, int depth, BatchChanges& changes) {
  const int from = std::clamp(e.pending_from_depth, 0, depth);
  const WorkCounts none{};
  WorkCounts alone{};
  alone.add_queries(e.query_tokens, e.context_tokens);
  WorkCounts joined{};
  joined.add_queries(e.query_tokens + e.pending_tokens,
                     std::max<std::int64_t>(e.context_tokens - e.pending_tokens, 0));
  if (from == 0) {
    return add_change(changes, 0, joined, none, false) &&
           add_change(changes, depth, none, joined, false);
  }
  if (from == depth) {
    return add_change(changes, 0, alone, none, false) &&
           add_change(changes, depth, none, alone, false);
  }
  return add_change(changes, 0, alone, none, false) &&
         add_change(changes, from, joined, alone, false) &&
         add_change(changes, depth, none, joined, false);
}

// Depth-wise batching's entry: its queries over the prelude (own context) and then recursion 1's
// layers (with recursion_context[0], its only override), or nothing in the stack at all (a token
// that waited for its coda and head). measured: depthwise_recursive 2.94x slower without.
bool first_recursion_shape(const BatchEntry& e, int depth, const StackLayout& layout) {
  return e.recursion_context_count <= 1 && e.pending_tokens <= 0 && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth &&
         (depth <= layout.first_recursion_end() || e.start_depth >= depth);
}

bool add_first_recursion_work(const BatchEntry& e, int depth, const StackLayout& layout,
                              BatchChanges& changes) {
  const int start = std::clamp(e.start_depth, 0, depth);
  if (start >= depth)
    return true;
  const int begin = std::clamp(layout.first_recursion_begin(), start, depth);
  const WorkCounts none{};
  WorkCounts own{};
  own.add_queries(e.query_tokens, e.context_tokens);
  WorkCounts recursion{};
  recursion.add_queries(e.query_tokens,
                        e.recursion_context_count == 1 ? e.recursion_context[0] : e.context_tokens);
  if (begin == start)
    return add_change(changes, start, recursion, none, false) &&
           add_change(changes, depth, none, recursion, false);
  if (begin == depth)
    return add_change(changes, start, own, none, false) &&
           add_change(changes, depth, none, own, false);
  return add_change(changes, start, own, none, false) &&
         add_change(changes, begin, recursion, own, false) &&
         add_change(changes, depth, none, recursion, false);
}

// skip_kv's entry: its queries from layer 1 to its depth, each recursion's layers with that
// recursion's context (recursion_context), nothing else (breakpoints 0, the starts of the
// recursions and the depth, with a change wherever the work differs). measured: skip_kv_recursive
// 2.32x slower without.
bool recursion_contexts_shape(const BatchEntry& e, int depth) {
  return e.start_depth <= 0 && e.pending_tokens <= 0 && e.recursion_context_count > 0 &&
         e.coda == BatchEntry::Coda::from_start && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth && depth > 0;
}

bool add_recursion_contexts_work(const StackLayout& layout, const BatchEntry& e, int depth,
                                 BatchChanges& changes) {
  const int overrides = recursion_context_overrides(e);
  const auto work_of = [&](int recursion) {
    WorkCounts w{};
    w.add_queries(e.query_tokens, recursion >= 1 && recursion <= overrides
                                      ? e.recursion_context[static_cast<std::size_t>(recursion - 1)]
                                      : e.context_tokens);
    return w;
  };
  const WorkCounts none{};
  WorkCounts before = work_of(layout.recursion_of_layer(0));
  if (!add_change(changes, 0, before, none, false))
    return false;
  for (int r = 1; r <= layout.recursions(); ++r) {
    const int begin = layout.recursion_begin(r);
    if (begin <= 0)
      continue;  // recursion 1 from layer 0 (no prelude): counted above
    if (begin >= depth)
      break;
    const WorkCounts w = work_of(r);
    if (w != before) {
      if (!add_change(changes, begin, w, before, false))
        return false;
      before = w;
    }
  }
  return add_change(changes, depth, none, before, false);
}

// An entry that is not a plain run from layer 1, as changes. False when the slots are full.
// Out of line, so that the loop over plain entries stays small: see add_change.
[[gnu::noinline]] bool add_off_plain_entry(const StackLayout& layout, const BatchEntry& e,
                                           int depth, BatchChanges& changes) {
  if (fill_shape(e, depth))
    return add_fill_work(e, depth, changes);
  if (first_recursion_shape(e, depth, layout))
    return add_first_recursion_work(e, depth, layout, changes);
  if (recursion_contexts_shape(e, depth))
    return add_recursion_contexts_work(layout, e, depth, changes);
  return add_entry_work(layout, e, changes);
}

// What one pass over the batch gathers: plain entries summed per depth they end at, the rest as
// changes at their boundaries.
struct BoundaryPass {
  BoundaryTable<EndsAtDepth> ends;
  BatchChanges changes;
  WorkCounts coda_extra{};  // entries off the plain path that still run the coda
  std::int64_t emitting = 0;
};

// The pass: plain entries summed per run of consecutive ones at one depth, each run added to its
// depth's slot once. False when the slots are full.
bool gather_boundaries(const StackLayout& layout, std::span<const BatchEntry> batch,
                       BoundaryPass& pass) {
  const int stacked = layout.stacked_depth();
  const auto flush = [&](int depth, const PlainRunSums& run) {
    EndsAtDepth* slot = pass.ends.find(depth);
    if (slot == nullptr)
      return false;
    slot->counts.add(run.counts());
    slot->kv_to_top += run.kv_to_top;
    return true;
  };
  PlainRunSums run{};
  int run_depth = -1;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    pass.emitting += e.emits_token ? 1 : 0;
    const int depth = std::clamp(e.depth, 0, stacked);
    if (!plain_run(e)) {
      if (runs_coda(e))
        pass.coda_extra.add(e);
      if (!add_off_plain_entry(layout, e, depth, pass.changes))
        return false;
      continue;
    }
    if (depth != run_depth) {
      if (run_depth >= 0 && !flush(run_depth, run))
        return false;
      run = PlainRunSums{};
      run_depth = depth;
    }
    run.add(e);
    if (e.kv_only_depth <= depth && e.useful_depth >= depth)
      continue;
    // K/V-only layers up to the top, nothing masked: counted with the entry's depth, not as
    // changes of their own (the top ends every group). measured: state_copy 1.19x slower without.
    if (e.kv_only_depth >= stacked && depth < stacked && e.useful_depth >= depth)
      run.kv_to_top += e.query_tokens;
    else if (!add_side_work(e, depth, stacked, pass.changes))
      return false;
  }
  return run_depth < 0 || flush(run_depth, run);
}

}  // namespace

bool RooflineCostModel::add_stack_by_boundaries(std::span<const BatchEntry> batch,
                                                const LayerWindow& window, GraphTotals& totals,
                                                WorkCounts& coda, std::int64_t& emitting) const {
  // Windowed layers need their keys counted per group of layers: the sweep does that.
  if (!window_.none())
    return false;
  BoundaryPass pass;
  if (!gather_boundaries(layout_, batch, pass))
    return false;
  BoundaryTable<ChangeAtBoundary>& changes = pass.changes.at_boundary;
  pass.ends.sort();
  changes.sort();
  // Walk the boundaries upwards. The batch of a group of layers is every plain entry deeper
  // than the group's start plus the changes below it; integer sums make this exact.
  WorkCounts running{};
  for (std::size_t i = 0; i < pass.ends.used; ++i)
    running.add(pass.ends.sorted(i).counts);
  coda = running;
  coda.add(pass.coda_extra);
  emitting = pass.emitting;
  running.add(pass.changes.at_first_layer);
  // Time changes only where the batch does; masked FLOPs also where its masked part does.
  WorkCounts masked{};
  std::size_t i = 0;
  std::size_t j = 0;
  int group_start = 0;
  int masked_start = 0;
  const WorkCounts no_change{};
  constexpr int k_none = std::numeric_limits<int>::max();
  while (i < pass.ends.used || j < changes.used) {
    const int at_end = i < pass.ends.used ? pass.ends.sorted(i).depth : k_none;
    const int at_change = j < changes.used ? changes.sorted(j).depth : k_none;
    const int boundary = std::min(at_end, at_change);
    const bool run_changes =
        at_end == boundary || (at_change == boundary && changes.sorted(j).run != no_change);
    if (boundary > masked_start) {
      if (masked.tokens > 0)
        totals.masked_flops +=
            masked_flops(masked_start, boundary, running.features(), masked, nullptr, window);
      masked_start = boundary;
    }
    if (run_changes && boundary > group_start) {
      add_stack_layers(group_start, boundary, running, nullptr, window, totals);
      group_start = boundary;
    }
    if (at_end == boundary) {
      running.subtract(pass.ends.sorted(i).counts);
      running.kv_only_tokens += pass.ends.sorted(i++).kv_to_top;
    }
    if (at_change == boundary) {
      running.add(changes.sorted(j).run);
      masked.add(changes.sorted(j++).masked);
    }
  }
  // The K/V-only tokens counted with their depths run to the top (every change of the batch is
  // behind the walk, so they are all that is left), ending the stack when no boundary did.
  if (running.kv_only_tokens > 0 && group_start < stacked_depth_)
    add_stack_layers(group_start, stacked_depth_, running, nullptr, window, totals);
  return true;
}

}  // namespace exitsim::sim
