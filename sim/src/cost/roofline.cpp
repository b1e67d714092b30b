#include "exitsim/sim/cost/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/core/model_validation.hpp"
#include "micro_batches.hpp"
#include "op_rates.hpp"
#include "roofline_ops.hpp"
#include "roofline_price.hpp"

// The roofline's general pricing: every op priced from the batch features of its layer group.
// Its construction is in roofline_build.cpp, its op-by-op view in roofline_breakdown.cpp, and
// the shortcuts that give the same doubles faster in roofline_fast.cpp and roofline_cache.cpp.

namespace exitsim::sim {

using roofline_price::as_double;
using roofline_price::at;
using roofline_price::flops_of;
using roofline_price::k_max_graph_ops;

std::size_t RooflineCostModel::variant_of_layer(int layer) const {
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto l = static_cast<std::size_t>(layer);
  std::size_t variant = 0;
  while (variant_prefix_[variant * row + l + 1] == variant_prefix_[variant * row + l])
    ++variant;
  return variant;
}

void RooflineCostModel::add_graph(const OpGraph& graph, const OpParams* params,
                                  const Priced* tabled, const BatchFeatures& x, double repeat,
                                  GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  const std::vector<int>& order =
      &graph == &layer_graph_ ? layer_sum_order_ : graph.topological_order();
  if (counts_only_ && counts_regroup_exactly_ && !totals.ordered) {
    // Shortcut: integer FLOPs in any order. measured: calibrated_decode/1 1.07x slower without.
    count_by_launch_class(graph, params, x, repeat, totals);
    return;
  }
  if (counts_only_) {
    // The same sums in the same order as walk_graph, without the times.
    double counted_flops = 0;
    double counted_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::size_t>(order[i]);
      const Priced p =
          tabled != nullptr && cache_.token_only[v] != 0 ? tabled[v] : price(params[v], x);
      counted_flops += p.flops;
      counted_bytes += p.bytes;
    }
    totals.flops += repeat * counted_flops;
    totals.bytes += repeat * counted_bytes;
    return;
  }
  // Shortcut: the chain's cached prefix. measured: decode/1 and /16 1.09-1.10x slower without.
  if (tabled != nullptr && !cache_.chain_prefixes.empty()) {
#ifndef NDEBUG
    // Debug builds hold the cached chain to the walk's doubles on every call.
    GraphTotals shortcut = totals;
    if (add_cached_chain(tabled, params, x, repeat, shortcut)) {
      walk_graph(graph, order, params, tabled, x, repeat, totals);
      const auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
      if (!same(shortcut.total, totals.total) || !same(shortcut.compute, totals.compute) ||
          !same(shortcut.memory, totals.memory) ||
          !same(shortcut.communication, totals.communication) ||
          !same(shortcut.overhead, totals.overhead) || !same(shortcut.flops, totals.flops) ||
          !same(shortcut.bytes, totals.bytes)) {
        throw std::logic_error("RooflineCostModel: the cached chain differs from the graph walk");
      }
      return;
    }
#else
    if (add_cached_chain(tabled, params, x, repeat, totals))
      return;
#endif
  }
  walk_graph(graph, order, params, tabled, x, repeat, totals);
}

void RooflineCostModel::walk_graph(const OpGraph& graph, const std::vector<int>& sum_order,
                                   const OpParams* params, const Priced* tabled,
                                   const BatchFeatures& x, double repeat,
                                   GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  // In a chain every op waits for the one before it in topological order (on one stream, or
  // handed between streams as a TP layer's all-reduces are), so while no duration is negative
  // the longest path is the sum of every op's duration and holds every launched op. The sum is
  // taken in `sum_order` (the layer's token-only ops first), so that its first part is the same
  // for every batch of a token count and can be cached (PriceCache::chain_prefixes). It differs
  // from the running sum in topological order (what longest_path gives) only by rounding, and an op
  // whose duration rounding absorbs still counts as on the path (its parts and launch).
  assert(sum_order.size() == n);
  if (graph.chain() && launch_ns_ >= 0) {
    ChainPathSums sums;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::size_t>(sum_order[i]);
      sums.add(tabled != nullptr && cache_.token_only[v] != 0 ? tabled[v] : price(params[v], x),
               launch_ns_);
    }
    if (sums.nonnegative) {
      totals.add_path(repeat, sums.length, sums.body, sums.overhead, sums.flops, sums.bytes);
      return;
    }
  }
  // Only the first n entries are written and read.
  std::array<double, k_max_graph_ops> body;
  std::array<PathPart, k_max_graph_ops> part;
  std::array<double, k_max_graph_ops> duration;
  double flops = 0;
  double bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::size_t>(sum_order[i]);
    const Priced p =
        tabled != nullptr && cache_.token_only[v] != 0 ? tabled[v] : price(params[v], x);
    body[v] = p.body_ns;
    part[v] = p.part();
    duration[v] = p.duration_ns;
    flops += p.flops;
    bytes += p.bytes;
  }
  PartTimes path_body{};
  double overhead = 0;
  std::array<double, k_max_graph_ops> finish;
  std::array<int, k_max_graph_ops> via;
  const PathEnd path =
      graph.longest_path(std::span<const double>(duration.data(), n),
                         std::span<double>(finish.data(), n), std::span<int>(via.data(), n));
  for (int v = path.sink; v >= 0; v = via[static_cast<std::size_t>(v)]) {
    const auto vi = static_cast<std::size_t>(v);
    if (part[vi] == PathPart::not_launched)
      continue;
    overhead += launch_ns_;
    path_body[static_cast<std::size_t>(part[vi])] += body[vi];
  }
  totals.add_path(repeat, path.length, path_body, overhead, flops, bytes);
}

void RooflineCostModel::add_stack_layers(int first, int last, const WorkCounts& run,
                                         const WorkCounts* windowed_run, const LayerWindow& window,
                                         GraphTotals& totals) const {
  first = std::max(first, window.first);
  last = std::min(last, std::min(window.last, stacked_depth_));
  if (last <= first)
    return;
  const BatchFeatures whole = run.features();
  // Windowed layers see the keys of their window (add_stack_by_sweep counts them).
  BatchFeatures windowed_x;
  if (windowed_run != nullptr)
    windowed_x = windowed_run->features();
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    const int layers = variant_prefix_[v * row + static_cast<std::size_t>(last)] -
                       variant_prefix_[v * row + static_cast<std::size_t>(first)];
    if (layers <= 0)
      continue;
    const BatchFeatures& x = windowed_run != nullptr && windowed_[v] != 0 ? windowed_x : whole;
    if (run.tokens > 0)
      add_graph(layer_graph_, &layer_params_[v * ops], token_row(v, x), x, layers, totals);
    if (run.kv_only_tokens > 0)
      add_serial_op(kv_params_[v], kv_tabled(v, x), x, layers, totals);
  }
}

double RooflineCostModel::masked_flops(int first, int last, const BatchFeatures& run_x,
                                       const WorkCounts& masked, const WorkCounts* windowed_masked,
                                       const LayerWindow& window) const {
  first = std::max(first, window.first);
  last = std::min(last, std::min(window.last, stacked_depth_));
  if (masked.tokens <= 0 || last <= first)
    return 0;
  const BatchFeatures whole = masked.features();
  BatchFeatures windowed_x;
  if (windowed_masked != nullptr)
    windowed_x = windowed_masked->features();
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  double flops = 0;
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    const int layers = variant_prefix_[v * row + static_cast<std::size_t>(last)] -
                       variant_prefix_[v * row + static_cast<std::size_t>(first)];
    if (layers <= 0)
      continue;
    const BatchFeatures& x = windowed_masked != nullptr && windowed_[v] != 0 ? windowed_x : whole;
    double per_layer = 0;
    for (std::size_t op = 0; op < ops; ++op) {
      const OpParams& params = layer_params_[v * ops + op];
      if (run_x[at(params.launch_if)] > 0)
        per_layer += flops_of(params, x);
    }
    flops += layers * per_layer;
  }
  return flops;
}

void RooflineCostModel::add_serial_op(const OpParams& params, const Priced* tabled,
                                      const BatchFeatures& x, double repeat,
                                      GraphTotals& totals) const {
  const Priced p = tabled != nullptr ? *tabled : price(params, x);
  if (!p.launched)
    return;
  totals.total += repeat * p.duration_ns;
  (p.compute_bound ? totals.compute : totals.memory) += repeat * p.body_ns;
  totals.overhead += repeat * launch_ns_;
  totals.flops += repeat * p.flops;
  totals.bytes += repeat * p.bytes;
}

// Exact for any number of boundaries: one pass over the batch per group of layers, each summing
// the entries' work at the group's first layer and finding where the next group begins.
void RooflineCostModel::add_stack_by_sweep(std::span<const BatchEntry> batch,
                                           const LayerWindow& window, GraphTotals& totals) const {
  // A model with windowed layers also sums each group as those layers see it.
  const AttentionWindow* windowed = window_.none() ? nullptr : &window_;
  int done = 0;
  for (;;) {
    WorkCounts run{};
    WorkCounts masked{};
    WorkCounts windowed_run{};
    WorkCounts windowed_masked{};
    int next = std::numeric_limits<int>::max();
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      const EntrySpan s = layout_.span_of(e);
      if (s.kv_end <= done)
        continue;
      run.add(layout_.work_at(e, s, done));
      masked.add(layout_.masked_at(e, s, done));
      if (windowed != nullptr) {
        windowed_run.add(layout_.work_at(e, s, done, windowed));
        windowed_masked.add(layout_.masked_at(e, s, done, windowed));
      }
      StackLayout::Breakpoints points;
      const std::size_t n = layout_.breakpoints(e, s, points);
      for (std::size_t i = 0; i < n; ++i) {
        if (points[i] > done) {
          next = std::min(next, points[i]);
          break;
        }
      }
    }
    if (next == std::numeric_limits<int>::max())
      return;
    add_stack_layers(done, next, run, windowed != nullptr ? &windowed_run : nullptr, window,
                     totals);
    totals.masked_flops += masked_flops(done, next, run.features(), masked,
                                        windowed != nullptr ? &windowed_masked : nullptr, window);
    done = next;
  }
}

IterationCost RooflineCostModel::iteration_cost(std::span<const BatchEntry> batch) const {
  if (stages_.size() > 1)
    return pipeline_cost(batch);
  GraphTotals totals;
  price_window(batch, scope_window_, totals);
  if (counts_only_ && counts_regroup_exactly_ && !(totals.flops < 0x1p53)) {
    // Past 2^53 FLOPs are no longer integer sums: counted op by op, as a roofline model would.
    totals = GraphTotals{};
    totals.ordered = true;
    price_window(batch, scope_window_, totals);
  }
  if (counts_only_) {
    IterationCost counted;
    counted.flops = totals.flops;
    counted.bytes = totals.bytes;
    counted.masked_flops = totals.masked_flops;
    return counted;
  }
  return to_cost(totals);
}

// Inlined into iteration_cost: measured with the attributes of add_change (roofline_fast.cpp).
[[gnu::always_inline]] inline void RooflineCostModel::price_window(
    std::span<const BatchEntry> batch, const LayerWindow& window, GraphTotals& totals) const {
  WorkCounts coda{};
  std::int64_t emitting = 0;
  // Shortcut: one pass. measured: decode/16 2.4x, decode/256 3.9x, batch_sync 5.7x slower without.
  if (!add_stack_by_boundaries(batch, window, totals, coda, emitting)) {
    add_stack_by_sweep(batch, window, totals);
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      if (runs_coda(e))
        coda.add(e);
      emitting += e.emits_token ? 1 : 0;
    }
  }
  add_coda_and_head(coda, emitting, window, totals);
  if (!probe_points_.empty())
    add_probes(batch, window, totals);
}

void RooflineCostModel::add_coda_and_head(const WorkCounts& all, std::int64_t emitting,
                                          const LayerWindow& window, GraphTotals& totals) const {
  // Coda layers run for every token that started at layer 1, whatever its depth (later tokens
  // attend over their K/V), or that says so (depth-wise batching).
  BatchFeatures all_x = all.features();
  const int coda_layers =
      std::min(window.last, stacked_depth_ + coda_layers_) - std::max(window.first, stacked_depth_);
  if (coda_layers > 0 && all.tokens > 0)
    add_graph(layer_graph_, layer_params_.data(), token_row(0, all_x), all_x, coda_layers, totals);
  if (window.head) {
    all_x[at(BatchFeature::emitting)] = as_double(emitting);
    std::size_t row = 0;
    if (!counts_only_ && cache_.head_key.row_of(all_x, cache_.head_totals.size(), row)) {
      // Shortcut: the cached head. measured: decode/1 1.48x, decode/16 1.34x slower without.
      totals.add(cache_.head_totals[row]);
      return;
    }
    add_graph(head_graph_, head_params_.data(), nullptr, all_x, 1, totals);
  }
}

void RooflineCostModel::count_stack_layers(int first, int last, const WorkCounts& run,
                                           IterationCost& counts) const {
  GraphTotals totals;
  // Measured cost models price no model with windowed layers (make_cost_model): `run` is what
  // every layer sees.
  add_stack_layers(first, last, run, nullptr, {0, stacked_depth_ + coda_layers_, true}, totals);
  counts.flops += totals.flops;
  counts.bytes += totals.bytes;
}

void RooflineCostModel::count_coda_and_head(const WorkCounts& all, std::int64_t emitting,
                                            IterationCost& counts) const {
  GraphTotals totals;
  add_coda_and_head(all, emitting, {0, stacked_depth_ + coda_layers_, true}, totals);
  counts.flops += totals.flops;
  counts.bytes += totals.bytes;
}

std::int64_t RooflineCostModel::probed_at(std::span<const BatchEntry> batch, int point,
                                          int stacked_depth) {
  std::int64_t probed = 0;
  for (const BatchEntry& e : batch) {
    // A decode token that ran the layer below the point and was still deciding: it exits there
    // or goes on. A batch_sync rider (past its useful depth) has exited already.
    const int depth = std::min(std::min(e.depth, stacked_depth), std::max(e.useful_depth, 0));
    probed += e.query_tokens == 1 && std::max(e.start_depth, 0) < point && point <= depth ? 1 : 0;
  }
  return probed;
}

void RooflineCostModel::add_probes(std::span<const BatchEntry> batch, const LayerWindow& window,
                                   GraphTotals& totals) const {
  for (const int point : probe_points_) {
    // The probe follows layer `point` (1-based): on the stage that runs it.
    if (point - 1 < window.first || point - 1 >= window.last)
      continue;
    const std::int64_t probed = probed_at(batch, point, stacked_depth_);
    if (probed == 0)
      continue;
    BatchFeatures x{};
    x[at(BatchFeature::tokens)] = as_double(probed);
    add_graph(probe_graph_, probe_params_.data(), nullptr, x, 1, totals);
  }
}

IterationCost RooflineCostModel::pipeline_cost(std::span<const BatchEntry> batch) const {
  // Micro-batches as vLLM's virtual engines form them (micro_batches.hpp), grouped in a scratch
  // buffer per thread, so that steady state allocates nothing.
  const std::size_t n_stages = stages_.size();
  thread_local MicroBatches micro_batches;
  micro_batches.split(batch, n_stages);
  const std::size_t micro = micro_batches.count();
  if (micro == 0) {
    GraphTotals none;
    price_window(batch, {0, stacked_depth_ + coda_layers_, true}, none);
    return to_cost(none);
  }
  const std::vector<std::int64_t>& tokens = micro_batches.tokens;

  // The cycle: a stage runs every micro-batch once per step; a micro-batch runs every stage and
  // hand-off once per step, waiting for its sampled tokens before its next step.
  GraphTotals all;
  GraphTotals busiest;
  GraphTotals longest_trip;
  std::array<GraphTotals, k_max_pipeline_stages> per_stage{};
  for (std::size_t m = 0; m < micro; ++m) {
    const std::span<const BatchEntry> part = micro_batches.part(m);
    GraphTotals trip;
    for (std::size_t s = 0; s < n_stages; ++s) {
      GraphTotals stage;
      price_window(part, stages_[s], stage);
      per_stage[s].add(stage);
      trip.add(stage);
      if (s + 1 < n_stages) {
        const double link_ns = hand_off_ns(s, as_double(tokens[m]));
        trip.total += link_ns;
        trip.communication += link_ns - launch_ns_;
        trip.overhead += launch_ns_;
      }
    }
    all.add(trip);
    if (trip.total > longest_trip.total)
      longest_trip = trip;
  }
  for (std::size_t s = 0; s < n_stages; ++s) {
    if (per_stage[s].total > busiest.total)
      busiest = per_stage[s];
  }
  GraphTotals step = busiest.total >= longest_trip.total ? busiest : longest_trip;
  // Executed work is everything every stage ran, whatever the critical path.
  step.flops = all.flops;
  step.bytes = all.bytes;
  step.masked_flops = all.masked_flops;
  return to_cost(step);
}

namespace {

// An iteration priced past k_max_iteration_us: the hardware keys (or efficiencies) make every
// step take days, and its rounding to int64 nanoseconds would wrap.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_iteration_price(double total_ns, double flops,
                                                                   double bytes) {
  throw InputError(
      {"", 0, 0, "hardware"},
      expected_found(fmt::format("iteration prices under {:g} us", k_max_iteration_us),
                     fmt::format("{:.4g} us for an iteration of {:.4g} FLOPs and {:.4g} bytes: "
                                 "hardware.peak_tflops, hardware.memory_bandwidth_gbps or "
                                 "cost_model.*_efficiency is far too small",
                                 total_ns / static_cast<double>(k_ns_per_us), flops, bytes)));
}

}  // namespace

IterationCost RooflineCostModel::to_cost(const GraphTotals& totals) {
  if (!(totals.total <= k_max_iteration_us * static_cast<double>(k_ns_per_us))) [[unlikely]]
    refuse_iteration_price(totals.total, totals.flops, totals.bytes);
  IterationCost cost;
  cost.total = std::llround(totals.total);
  cost.overhead = std::llround(totals.overhead);
  cost.compute_bound = std::llround(totals.compute);
  cost.communication = std::llround(totals.communication);
  cost.memory_bound = cost.total - cost.compute_bound - cost.communication - cost.overhead;
  if (cost.memory_bound < 0) {  // rounding when nothing on the path is memory-bound
    cost.compute_bound += cost.memory_bound;
    cost.memory_bound = 0;
  }
  cost.flops = totals.flops;
  cost.bytes = totals.bytes;
  cost.masked_flops = totals.masked_flops;
  return cost;
}

double RooflineCostModel::hand_off_ns(std::size_t stage, double tokens) const {
  return tokens * hand_off_ns_per_token_[stage] + hand_off_fixed_ns_[stage];
}

}  // namespace exitsim::sim
