#pragma once

// One op's price for one batch (RooflineCostModel::price), shared by the general pricing
// (roofline.cpp) and its shortcuts (roofline_fast.cpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim::roofline_price {

constexpr std::size_t at(BatchFeature f) {
  return static_cast<std::size_t>(f);
}

inline double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

// Graphs are checked against this scratch size of the allocation-free evaluation at
// construction.
constexpr int k_max_graph_ops = 32;

// An op's FLOPs at x, launched or not.
inline double flops_of(const OpParams& params, const BatchFeatures& x) {
  double flops = 0;
  for (const OpParams::Term& term : params.terms)
    flops += term.flops * x[at(term.feature)];
  return flops;
}

// x^(2/3) for x in [1, 2], within 2e-8 of it: a degree-7 polynomial (least squares on Chebyshev
// nodes) in x - 1.5, where std::cbrt costs several times more.
inline double two_thirds_power_on_1_2(double x) {
  const double t = x - 1.5;
  double p = 0.00095873511065716513;
  p = p * t - 0.0018346310103032786;
  p = p * t + 0.0032849268944008477;
  p = p * t - 0.0074175248816632693;
  p = p * t + 0.019175287011642842;
  p = p * t - 0.064711636282574606;
  p = p * t + 0.58238693751288739;
  return p * t + 1.310370712682785;
}

// A kernel's time from its compute and memory times: the larger, or near the ridge the two
// blended as (compute^k + memory^k)^(1/k) (KernelCorrections::ridge_exponent; 0: the larger).
// Both are scaled by the larger first, so that the powers stay finite.
inline double ridge_time(double compute_ns, double memory_ns, double exponent) {
  const double larger = compute_ns > memory_ns ? compute_ns : memory_ns;
  if (exponent <= 0 || !(larger > 0))
    return larger;
  const double smaller = compute_ns > memory_ns ? memory_ns : compute_ns;
  const double ratio = smaller > 0 ? smaller / larger : 0.0;
  // The presets' exponents by roots, not powers: two pow calls tripled the price of a mixed
  // prefill iteration on cost_model_bench.
  if (exponent == 2)
    return larger * std::sqrt(1 + ratio * ratio);
  if (exponent == 1.5)
    return larger * two_thirds_power_on_1_2(1 + ratio * std::sqrt(ratio));
  return larger * std::pow(1 + std::pow(ratio, exponent), 1 / exponent);
}

}  // namespace exitsim::sim::roofline_price

namespace exitsim::sim {

// Inlined wherever it is called (as before the split; not measured apart).
[[gnu::always_inline]] inline RooflineCostModel::Priced RooflineCostModel::price(
    const OpParams& params, const BatchFeatures& x) const {
  using roofline_price::at;
  Priced p;
  if (!(x[at(params.launch_if)] > 0))
    return p;
  if (params.collective) {
    double link_bytes = 0;
    for (std::size_t i = 0; i < params.used_terms; ++i)
      link_bytes += params.terms[i].bytes * x[at(params.terms[i].feature)];
    p.launched = true;
    p.communication = true;
    p.body_ns = link_bytes * params.ns_per_byte + params.fixed_ns;
    p.duration_ns = p.body_ns + launch_ns_;
    return p;
  }
  double flops = 0;
  double bytes = params.fixed_bytes;
  // Only the used terms: most ops have one or two of the four.
  for (std::size_t i = 0; i < params.used_terms; ++i) {
    const OpParams::Term& term = params.terms[i];
    const double amount = x[at(term.feature)];
    flops += term.flops * amount;
    bytes += term.bytes * amount;
  }
  if (params.expert_imbalance != 0) {
    const double tokens = x[at(BatchFeature::tokens)];
    const double busiest =
        std::min(1 + params.expert_imbalance / std::sqrt(tokens), params.expert_imbalance_cap);
    if (params.balanced_flops == 0 && params.balanced_bytes == 0) {
      flops *= busiest;
      bytes = params.fixed_bytes + (bytes - params.fixed_bytes) * busiest;
    } else {
      const double even_flops = params.balanced_flops * tokens;
      const double even_bytes = params.fixed_bytes + params.balanced_bytes * tokens;
      flops = even_flops + (flops - even_flops) * busiest;
      bytes = even_bytes + (bytes - even_bytes) * busiest;
    }
  }
  if (params.routed_weight_bytes != 0) {
    bytes += params.routed_weight_bytes *
             (1 - std::pow(params.expert_miss, x[at(BatchFeature::tokens)]));
  }
  const double compute_ns = flops * params.ns_per_flop;
  const double memory_ns = bytes * params.ns_per_byte;
  p.launched = true;
  p.compute_bound = compute_ns > memory_ns;
  p.body_ns = roofline_price::ridge_time(compute_ns, memory_ns, ridge_exponent_) + params.fixed_ns +
              params.ns_per_unit * x[at(params.timed_feature)];
  p.duration_ns = p.body_ns + launch_ns_;
  p.flops = flops;
  p.bytes = bytes;
  return p;
}

// The price cache's lookups (its shortcut, next to the pricing it stands in for).
inline const RooflineCostModel::Priced* RooflineCostModel::token_row(std::size_t variant,
                                                                     const BatchFeatures& x) const {
  std::size_t tokens = 0;
  if (!cache_.token_key.row_of(x, k_token_table, tokens))
    return nullptr;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  return &cache_.token_prices[(variant * k_token_table + tokens) * ops];
}

inline const RooflineCostModel::Priced* RooflineCostModel::kv_tabled(std::size_t variant,
                                                                     const BatchFeatures& x) const {
  std::size_t tokens = 0;
  if (cache_.kv_prices.empty() || !cache_.kv_key.row_of(x, k_token_table, tokens))
    return nullptr;
  return &cache_.kv_prices[variant * k_token_table + tokens];
}

}  // namespace exitsim::sim
