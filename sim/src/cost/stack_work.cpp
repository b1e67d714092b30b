#include "exitsim/sim/cost/stack_work.hpp"

#include <algorithm>

namespace exitsim::sim {

StackLayout::StackLayout(const DepthStructure& depth) {
  const int stacked = depth.stacked_depth();
  recursion_of_layer_.resize(static_cast<std::size_t>(stacked));
  for (int l = 0; l < stacked; ++l) {
    const int r = depth.recursion_of_depth(l + 1);
    recursion_of_layer_[static_cast<std::size_t>(l)] = r;
    if (r > static_cast<int>(recursion_begin_.size()))
      recursion_begin_.push_back(l);
  }
  first_recursion_begin_ = recursion_begin_.empty() ? stacked : recursion_begin_[0];
  first_recursion_end_ = recursion_begin_.size() > 1 ? recursion_begin_[1] : stacked;
}

std::size_t StackLayout::breakpoints(const BatchEntry& e, const EntrySpan& s,
                                     Breakpoints& out) const {
  std::size_t n = 0;
  out[n++] = s.start;
  out[n++] = s.pending_from;
  out[n++] = s.useful;
  out[n++] = s.depth;
  out[n++] = s.kv_end;
  // Recursions whose context differs from the next one's, or where K/V reuse begins.
  int last_recursion = e.reuse_first_recursion_kv ? 2 : 0;
  if (recursion_context_overrides(e) > 0)
    last_recursion = std::max(last_recursion, recursion_context_overrides(e) + 1);
  last_recursion = std::min(last_recursion, static_cast<int>(recursion_begin_.size()));
  for (int r = 1; r <= last_recursion; ++r) {
    const int begin = recursion_begin_[static_cast<std::size_t>(r - 1)];
    if (begin > s.start && begin < s.depth)
      out[n++] = begin;
  }
  // Insertion sort: a dozen values at most, mostly in order already.
  for (std::size_t i = 1; i < n; ++i) {
    const int v = out[i];
    std::size_t j = i;
    for (; j > 0 && out[j - 1] > v; --j)
      out[j] = out[j - 1];
    out[j] = v;
  }
  return static_cast<std::size_t>(
      std::unique(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n)) - out.begin());
}

void LayerBatches::clear(int layers) {
  const auto size = static_cast<std::size_t>(layers) + 1;
  // Only entries make deltas non-zero, and reading a layer zeroes its delta: what is left is
  // the unread layers of a used walk (the end of the stack, or a walk a throw cut short).
  if (delta_.size() != size) {
    delta_.assign(size, WorkCounts{});
  } else if (used_) {
    for (std::size_t l = next_; l < size; ++l)
      delta_[l] = WorkCounts{};
  }
  coda = WorkCounts{};
  embedded = 0;
  emitting = 0;
  next_ = 0;
  used_ = false;
}

EntrySpan LayerBatches::add(const StackLayout& layout, const BatchEntry& e) {
  used_ = true;
  const EntrySpan s = layout.span_of(e);
  StackLayout::Breakpoints points;
  const std::size_t n = layout.breakpoints(e, s, points);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const WorkCounts w = layout.work_at(e, s, points[i]);
    delta_[static_cast<std::size_t>(points[i])].add(w);
    delta_[static_cast<std::size_t>(points[i + 1])].subtract(w);
  }
  if (runs_coda(e))
    coda.add_queries(e.query_tokens, e.context_tokens);
  if (s.start == 0)
    embedded += e.query_tokens;
  if (e.emits_token)
    ++emitting;
  return s;
}

}  // namespace exitsim::sim
