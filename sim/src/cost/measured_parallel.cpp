#include "exitsim/sim/cost/measured_parallel.hpp"

#include <algorithm>
#include <array>

#include "micro_batches.hpp"

namespace exitsim::sim {

std::string roofline_stand_ins_used(const std::array<std::int64_t, k_roofline_stand_ins>& calls) {
  static constexpr std::array<const char*, k_roofline_stand_ins> k_stand_ins = {
      "tp_all_reduce (hardware.link_latency_us + its bytes at hardware.link_efficiency of "
      "hardware.link_bandwidth_gbps)",
      "the logits gather (the same link)",
      "pp_send_recv (hand-offs within a node: hardware.send_latency_us, send_efficiency)",
      "pp_send_recv.remote (hand-offs between nodes: hardware.node_link_latency_us, "
      "node_link_efficiency)",
      "the final norm, lm_head and sampling (the profile's traces ran a model without an LM "
      "head)"};
  std::string used;
  for (std::size_t k = 0; k < k_stand_ins.size(); ++k) {
    if (calls[k] > 0)
      used += (used.empty() ? "" : ", ") + std::string(k_stand_ins[k]);
  }
  return used;
}

MeasuredParallel::MeasuredParallel(const ModelShape& model, const ParallelPricing& pricing,
                                   bool prices_head)
    : parallel_(pricing.parallel) {
  if (parallel_.tensor <= 1 && parallel_.pipeline <= 1 && !prices_head)
    return;
  roofline_.emplace(model, pricing.hardware, pricing.efficiency, parallel_);
  if (parallel_.pipeline <= 1)
    return;
  const int layers = model.depth.full_depth();
  stages_ = split_pipeline(layers, parallel_.pipeline);
  stage_of_.assign(static_cast<std::size_t>(layers), 0);
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    for (int l = stages_[s].first; l < stages_[s].last; ++l)
      stage_of_[static_cast<std::size_t>(l)] = static_cast<std::uint8_t>(s);
    if (s + 1 < stages_.size()) {
      remote_.push_back(hand_off_crosses_nodes(static_cast<int>(s), parallel_,
                                               pricing.hardware.interconnect.gpus_per_node)
                            ? 1
                            : 0);
    }
  }
}

double MeasuredParallel::all_reduce_us(std::int64_t tokens) const {
  BatchFeatures x{};
  x[feature_index(BatchFeature::tokens)] = static_cast<double>(tokens);
  return roofline_->op_cost(OpKind::tp_all_reduce, x).duration_ns * 1e-3;
}

double MeasuredParallel::logits_gather_us(std::int64_t emitting) const {
  BatchFeatures x{};
  x[feature_index(BatchFeature::emitting)] = static_cast<double>(emitting);
  return roofline_->op_cost(OpKind::logits_gather, x).duration_ns * 1e-3;
}

double MeasuredParallel::head_us(std::int64_t emitting) const {
  // The final norm of the emitting tokens, as a measured LM head op holds it.
  BatchFeatures x{};
  x[feature_index(BatchFeature::tokens)] = static_cast<double>(emitting);
  x[feature_index(BatchFeature::emitting)] = static_cast<double>(emitting);
  double ns = 0;
  for (const OpKind kind : {OpKind::final_norm, OpKind::lm_head, OpKind::sampling})
    ns += roofline_->op_cost(kind, x).duration_ns;
  return ns * 1e-3;
}

double MeasuredParallel::hand_off_us(std::size_t boundary, std::int64_t tokens) const {
  return roofline_->hand_off_ns(boundary, static_cast<double>(tokens)) * 1e-3;
}

double MeasuredParallel::step_us(std::span<const BatchEntry> batch,
                                 const StagePricer& pricer) const {
  const std::size_t n = stages();
  thread_local MicroBatches micro_batches;
  micro_batches.split(batch, n);
  std::array<double, k_max_pipeline_stages> per_stage{};
  std::array<double, k_max_pipeline_stages> part_us{};
  double longest_trip = 0;
  for (std::size_t m = 0; m < micro_batches.count(); ++m) {
    pricer.stage_us(micro_batches.part(m), std::span<double>(part_us.data(), n));
    double trip = 0;
    for (std::size_t s = 0; s < n; ++s) {
      per_stage[s] += part_us[s];
      trip += part_us[s];
      if (s + 1 < n)
        trip += pricer.hand_off_us(s, micro_batches.tokens[m]);
    }
    longest_trip = std::max(longest_trip, trip);
  }
  const double busiest = *std::max_element(per_stage.begin(), per_stage.begin() + n);
  return std::max(busiest, longest_trip);
}

}  // namespace exitsim::sim
