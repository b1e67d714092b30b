// The roofline's other shortcuts (see roofline_fast.cpp for how they are kept and measured):
// - the price cache: prices computed once at construction, looked up by count (PriceCache, one
//   applicability rule: PriceTableKey);
// - a counting model's FLOPs and bytes per launch condition (count_by_launch_class).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/sim/cost/roofline.hpp"
#include "roofline_price.hpp"

namespace exitsim::sim {

using roofline_price::at;

// ---- The price cache ---------------------------------------------------------------------------

void RooflineCostModel::build_price_cache() {
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  const auto variants = static_cast<std::size_t>(variants_);
  // The layer ops every variant of which the token key covers.
  for (std::size_t op = 0; op < ops; ++op) {
    bool covered = true;
    for (std::size_t v = 0; v < variants; ++v)
      covered = covered && cache_.token_key.covers(layer_params_[v * ops + op]);
    cache_.token_only.push_back(covered ? 1 : 0);
  }
  cache_.token_prices.resize(variants * k_token_table * ops);
  for (std::size_t v = 0; v < variants; ++v) {
    for (std::size_t t = 0; t < k_token_table; ++t) {
      const BatchFeatures x = cache_.token_key.row_features(t);
      for (std::size_t op = 0; op < ops; ++op) {
        if (cache_.token_only[op] != 0)
          cache_.token_prices[(v * k_token_table + t) * ops + op] =
              price(layer_params_[v * ops + op], x);
      }
    }
  }

  // The layer's sum order: its token-only ops, then the others, each in topological order.
  layer_sum_order_ = layer_graph_.topological_order();
  const auto others = std::stable_partition(
      layer_sum_order_.begin(), layer_sum_order_.end(),
      [&](int v) { return cache_.token_only[static_cast<std::size_t>(v)] != 0; });
  layer_token_ops_ = static_cast<std::size_t>(others - layer_sum_order_.begin());
  if (layer_graph_.chain() && launch_ns_ >= 0) {
    for (std::size_t row = 0; row < variants * k_token_table; ++row) {
      const Priced* prices = &cache_.token_prices[row * ops];
      ChainPathSums sums;
      for (std::size_t i = 0; i < layer_token_ops_; ++i)
        sums.add(prices[static_cast<std::size_t>(layer_sum_order_[i])], launch_ns_);
      cache_.chain_prefixes.push_back(sums);
    }
  }

  const bool kv_covered =
      std::all_of(kv_params_.begin(), kv_params_.end(),
                  [&](const OpParams& params) { return cache_.kv_key.covers(params); });
  for (std::size_t v = 0; kv_covered && v < variants; ++v) {
    for (std::size_t t = 0; t < k_token_table; ++t)
      cache_.kv_prices.push_back(price(kv_params_[v], cache_.kv_key.row_features(t)));
  }

  const bool head_covered =
      std::all_of(head_params_.begin(), head_params_.end(),
                  [&](const OpParams& params) { return cache_.head_key.covers(params); });
  for (std::size_t t = 0; head_covered && t < k_token_table; ++t) {
    GraphTotals alone;
    add_graph(head_graph_, head_params_.data(), nullptr, cache_.head_key.row_features(t), 1, alone);
    cache_.head_totals.push_back(alone);
  }
}

bool RooflineCostModel::add_cached_chain(const Priced* tabled, const OpParams* params,
                                         const BatchFeatures& x, double repeat,
                                         GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(layer_graph_.size());
  // The walk's sums over the token-only ops come from the cache; the others are added in the
  // walk's order, so the doubles are the walk's.
  ChainPathSums sums =
      cache_.chain_prefixes[static_cast<std::size_t>(tabled - cache_.token_prices.data()) / n];
  for (std::size_t i = layer_token_ops_; i < n; ++i) {
    const auto v = static_cast<std::size_t>(layer_sum_order_[i]);
    sums.add(price(params[v], x), launch_ns_);
  }
  if (!sums.nonnegative)
    return false;  // the graph walk decides
  totals.add_path(repeat, sums.length, sums.body, sums.overhead, sums.flops, sums.bytes);
  return true;
}

// ---- Counting by launch class ------------------------------------------------------------------

RooflineCostModel::LinearCounts RooflineCostModel::linear_counts(std::span<const OpParams> params) {
  LinearCounts classes;
  for (const OpParams& op : params) {
    const std::size_t launch = at(op.launch_if);
    auto c = std::find_if(classes.begin(), classes.end(),
                          [&](const LaunchClass& k) { return k.launch == launch; });
    if (c == classes.end()) {
      classes.push_back(LaunchClass{});
      c = std::prev(classes.end());
      c->launch = launch;
    }
    c->fixed_bytes += op.fixed_bytes;
    for (std::size_t i = 0; i < op.used_terms; ++i) {
      const auto feature = static_cast<std::uint8_t>(at(op.terms[i].feature));
      std::size_t t = 0;
      while (t < c->terms && c->feature[t] != feature)
        ++t;
      if (t == c->terms)
        c->feature[c->terms++] = feature;
      c->flops[t] += op.terms[i].flops;
      c->bytes[t] += op.terms[i].bytes;
    }
  }
  return classes;
}

void RooflineCostModel::count_by_launch_class(const OpGraph& graph, const OpParams* params,
                                              const BatchFeatures& x, double repeat,
                                              GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  const LinearCounts& classes =
      params == head_params_.data()
          ? head_linear_
          : layer_linear_[static_cast<std::size_t>(params - layer_params_.data()) / n];
  double counted_flops = 0;
  double counted_bytes = 0;
  for (const LaunchClass& c : classes) {
    if (!(x[c.launch] > 0))
      continue;
    double class_flops = 0;
    double class_bytes = c.fixed_bytes;
    for (std::size_t t = 0; t < c.terms; ++t) {
      const double amount = x[c.feature[t]];
      class_flops += c.flops[t] * amount;
      class_bytes += c.bytes[t] * amount;
    }
    counted_flops += class_flops;
    counted_bytes += class_bytes;
  }
  totals.flops += repeat * counted_flops;
  totals.bytes += repeat * counted_bytes;
}

}  // namespace exitsim::sim
