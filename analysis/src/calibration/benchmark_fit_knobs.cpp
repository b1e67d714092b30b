#include "benchmark_fit_knobs.hpp"

#include <fmt/format.h>

namespace exitsim::analysis {
namespace {

using scenario::CostModelConfig;

double us(TimeNs ns) {
  return static_cast<double>(ns) / 1e3;
}

double or_default(double value, double fallback) {
  return value > 0 ? value : fallback;
}

std::string no_all_reduce(const ParallelSpec& parallel, const HardwareSpec&) {
  return parallel.tensor > 1
             ? ""
             : "the scenario runs no all-reduce (parallel.tensor 1): its collective "
               "terms price nothing the runs measured";
}

// Which of the pipeline's hand-offs stay in a node (`remote` false) or leave it.
bool has_hand_off(const ParallelSpec& parallel, const HardwareSpec& hardware, bool remote) {
  for (int stage = 0; stage + 1 < parallel.pipeline; ++stage) {
    if (hand_off_crosses_nodes(stage, parallel, hardware.interconnect.gpus_per_node) == remote)
      return true;
  }
  return false;
}

std::string no_send_in_node(const ParallelSpec& parallel, const HardwareSpec& hardware) {
  if (has_hand_off(parallel, hardware, false))
    return "";
  return parallel.pipeline == 1 ? "the scenario has no pipeline stages (parallel.pipeline 1): no "
                                  "hand-off prices a send"
                                : "every pipeline hand-off of the scenario leaves its node: no "
                                  "send within one";
}

std::string no_send_across_nodes(const ParallelSpec& parallel, const HardwareSpec& hardware) {
  if (has_hand_off(parallel, hardware, true))
    return "";
  return fmt::format(
      "no pipeline hand-off of the scenario leaves its node (parallel.pipeline {} of "
      "parallel.tensor {} GPUs, {} to a node)",
      parallel.pipeline, parallel.tensor, hardware.interconnect.gpus_per_node);
}

std::string always_priced(const ParallelSpec&, const HardwareSpec&) {
  return "";
}

}  // namespace

const std::vector<FitKnob>& fit_knobs() {
  // Intervals as --fit-hardware searches the corrections (kernel_fit.cpp); the efficiencies from
  // 0.05 (a twentieth of peak: anything lower is a broken setup, not a correction) to 1.
  static const std::vector<FitKnob> knobs = {
      {"cost_model.flops_efficiency", 0.05, 1,
       [](const HardwareSpec&, const CostModelConfig& c) { return c.flops_efficiency; },
       [](HardwareSpec&, CostModelConfig& c, double v) { c.flops_efficiency = v; }, always_priced},
      {"cost_model.bandwidth_efficiency", 0.05, 1,
       [](const HardwareSpec&, const CostModelConfig& c) { return c.bandwidth_efficiency; },
       [](HardwareSpec&, CostModelConfig& c, double v) { c.bandwidth_efficiency = v; },
       always_priced},
      {"hardware.min_kernel_us", 0, 20,
       [](const HardwareSpec& h, const CostModelConfig&) { return h.kernels.min_kernel_ns / 1e3; },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.kernels.min_kernel_ns = v * 1e3; },
       always_priced},
      {"hardware.decode_attention_floor_us", 0, 60,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return h.kernels.decode_attention_floor_ns / 1e3;
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.kernels.decode_attention_floor_ns = v * 1e3;
       },
       always_priced},
      {"hardware.decode_attention_us_per_sequence_head", 0, 1,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return h.kernels.decode_attention_ns_per_sequence_head / 1e3;
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.kernels.decode_attention_ns_per_sequence_head = v * 1e3;
       },
       always_priced},
      {"hardware.elementwise_efficiency", 0.05, 1,
       [](const HardwareSpec& h, const CostModelConfig& c) {
         return or_default(h.kernels.elementwise_efficiency, c.bandwidth_efficiency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.kernels.elementwise_efficiency = v; },
       always_priced},
      {"hardware.prefill_attention_efficiency", 0.02, 1,
       [](const HardwareSpec& h, const CostModelConfig& c) {
         return or_default(h.kernels.prefill_attention_efficiency, c.flops_efficiency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.kernels.prefill_attention_efficiency = v;
       },
       always_priced},
      // 0 is max(compute, memory): the blend's sharpest end, 8, stands for it.
      {"hardware.ridge_exponent", 1, 8,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return or_default(h.kernels.ridge_exponent, 8);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.kernels.ridge_exponent = v; },
       always_priced},
      {"hardware.launch_overhead_us", 0, 20,
       [](const HardwareSpec& h, const CostModelConfig&) { return us(h.launch_overhead); },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.launch_overhead = from_microseconds(v);
       },
       always_priced},
      {"hardware.link_latency_us", 0, 200,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return us(h.interconnect.link_latency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.interconnect.link_latency = from_microseconds(v);
       },
       no_all_reduce},
      {"hardware.link_efficiency", 0.05, 1,
       [](const HardwareSpec& h, const CostModelConfig& c) {
         return or_default(h.interconnect.link_efficiency, c.bandwidth_efficiency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.interconnect.link_efficiency = v; },
       no_all_reduce},
      {"hardware.send_latency_us", 0, 200,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return us(h.interconnect.send_latency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.interconnect.send_latency = from_microseconds(v);
       },
       no_send_in_node},
      {"hardware.send_efficiency", 0.05, 1,
       [](const HardwareSpec& h, const CostModelConfig& c) {
         return or_default(h.interconnect.send_efficiency,
                           or_default(h.interconnect.link_efficiency, c.bandwidth_efficiency));
       },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.interconnect.send_efficiency = v; },
       no_send_in_node},
      {"hardware.node_link_latency_us", 0, 500,
       [](const HardwareSpec& h, const CostModelConfig&) {
         return us(h.interconnect.node_link_latency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) {
         h.interconnect.node_link_latency = from_microseconds(v);
       },
       no_send_across_nodes},
      {"hardware.node_link_efficiency", 0.05, 1,
       [](const HardwareSpec& h, const CostModelConfig& c) {
         return or_default(h.interconnect.node_link_efficiency, c.bandwidth_efficiency);
       },
       [](HardwareSpec& h, CostModelConfig&, double v) { h.interconnect.node_link_efficiency = v; },
       no_send_across_nodes},
  };
  return knobs;
}

void set_knob(scenario::Scenario& scenario, const FitKnob& knob, double value) {
  knob.set(scenario.hardware.spec, scenario.cost_model, value);
  for (scenario::ReplicaGroup& group : scenario.replica_groups)
    knob.set(group.hardware.spec, group.cost_model, value);
}

}  // namespace exitsim::analysis
