#include "op_rates.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"

namespace exitsim::sim {
namespace {

void check_range(double value, double low, double high, const char* key, const char* what) {
  if (!(value >= low && value <= high)) {
    throw InputError({"", 0, 0, key}, expected_found(what, fmt::format("{}", value)));
  }
}

}  // namespace

void check_corrections(const HardwareSpec& hardware) {
  const KernelCorrections& k = hardware.kernels;
  // The times are held in ns and named by their keys in us: checked and reported in us.
  check_range(k.min_kernel_ns / 1e3, 0, 1e6, "hardware.min_kernel_us", "a time in [0, 1e6] us");
  check_range(k.ridge_exponent, 0, 64, "hardware.ridge_exponent",
              "0 (none) or an exponent up to 64");
  check_range(k.elementwise_efficiency, 0, 1, "hardware.elementwise_efficiency",
              "a fraction in [0, 1] (0: the cost model's bandwidth efficiency)");
  check_range(k.decode_attention_floor_ns / 1e3, 0, 1e6, "hardware.decode_attention_floor_us",
              "a time in [0, 1e6] us");
  check_range(k.decode_attention_ns_per_sequence_head / 1e3, 0, 1e6,
              "hardware.decode_attention_us_per_sequence_head", "a time in [0, 1e6] us");
  check_range(k.prefill_attention_efficiency, 0, 1, "hardware.prefill_attention_efficiency",
              "a fraction in [0, 1] (0: the cost model's flops efficiency)");
  check_range(hardware.interconnect.link_efficiency, 0, 1, "hardware.link_efficiency",
              "a fraction in [0, 1] (0: the cost model's bandwidth efficiency)");
  check_range(hardware.interconnect.send_efficiency, 0, 1, "hardware.send_efficiency",
              "a fraction in [0, 1] (0: hardware.link_efficiency)");
  check_range(hardware.interconnect.node_link_efficiency, 0, 1, "hardware.node_link_efficiency",
              "a fraction in [0, 1] (0: the cost model's bandwidth efficiency)");
}

std::string kernel_corrections_note(const HardwareSpec& hardware) {
  const KernelCorrections& k = hardware.kernels;
  const Interconnect& link = hardware.interconnect;
  if (k == KernelCorrections{}) {
    return fmt::format(
        "{} has no kernel corrections (the bare roofline: small kernels, "
        "attention and collectives price low against real GPUs; docs/cost_model.md, \"Kernel "
        "corrections\")",
        hardware.name);
  }
  const std::optional<HardwareSpec> preset = find_hardware_preset(hardware.name);
  const bool as_preset = preset && preset->kernels == k &&
                         preset->interconnect.link_latency == link.link_latency &&
                         preset->interconnect.link_efficiency == link.link_efficiency;
  return fmt::format(
      "{} priced with kernel corrections {}: min kernel {:g} us, ridge "
      "exponent {:g}, element-wise efficiency {:g}, decode attention {:g} us + {:g} us per "
      "sequence and K/V head, prefill attention efficiency {:g}, collectives {:g} us + bytes at "
      "{:g} of the link (docs/cost_model.md, \"Kernel corrections\")",
      hardware.name,
      as_preset ? "of its preset, " + k.source
                : std::string("set by the scenario (not the preset's fitted values)"),
      k.min_kernel_ns / 1e3, k.ridge_exponent, k.elementwise_efficiency,
      k.decode_attention_floor_ns / 1e3, k.decode_attention_ns_per_sequence_head / 1e3,
      k.prefill_attention_efficiency, static_cast<double>(link.link_latency) / 1e3,
      link.link_efficiency);
}

OpRates::OpRates(const HardwareSpec& hardware, double peak, RooflineEfficiency efficiency,
                 bool tensor_parallel) {
  const KernelCorrections& k = hardware.kernels;
  gemm_ns_per_flop_ = 1e9 / (peak * efficiency.flops);
  attention_ns_per_flop_ =
      1e9 / (peak * or_default(k.prefill_attention_efficiency, efficiency.flops));
  ns_per_byte_ = 1e9 / (hardware.memory_bandwidth * efficiency.bandwidth);
  elementwise_ns_per_byte_ = 1e9 / (hardware.memory_bandwidth *
                                    or_default(k.elementwise_efficiency, efficiency.bandwidth));
  const Interconnect& link = hardware.interconnect;
  link_ns_per_byte_ =
      tensor_parallel
          ? 1e9 / (link.link_bandwidth * or_default(link.link_efficiency, efficiency.bandwidth))
          : 0;
  min_kernel_ns_ = k.min_kernel_ns;
  decode_floor_ns_ = or_default(k.decode_attention_floor_ns, k.min_kernel_ns);
  decode_ns_per_sequence_head_ = k.decode_attention_ns_per_sequence_head;
  collective_latency_ns_ = static_cast<double>(link.link_latency);
}

void OpRates::apply(OpKind kind, const TensorShard& shard, OpParams& params) const {
  if (params.collective) {
    params.ns_per_byte = link_ns_per_byte_;
    params.fixed_ns = collective_latency_ns_;
    params.fixed_bound = PriceBound::collective;
    params.memory_parameter = "hardware.link_bandwidth_gbps, hardware.link_efficiency";
    params.fixed_parameter = "hardware.link_latency_us";
    return;
  }
  params.ns_per_flop = gemm_ns_per_flop_;
  params.ns_per_byte = ns_per_byte_;
  params.fixed_ns = min_kernel_ns_;
  params.fixed_bound = PriceBound::kernel_floor;
  params.compute_parameter = "cost_model.flops_efficiency";
  params.memory_parameter = "cost_model.bandwidth_efficiency";
  params.fixed_parameter = "hardware.min_kernel_us";
  switch (kind) {
    case OpKind::input_norm:
    case OpKind::post_attention_norm:
    case OpKind::mlp_activation:
    case OpKind::final_norm:
    case OpKind::sampling:
    case OpKind::probe_norm:
    case OpKind::probe_softmax:
      params.ns_per_byte = elementwise_ns_per_byte_;
      params.memory_parameter = "hardware.elementwise_efficiency";
      break;
    case OpKind::attention_prefill:
      params.ns_per_flop = attention_ns_per_flop_;
      params.compute_parameter = "hardware.prefill_attention_efficiency";
      break;
    case OpKind::attention_decode:
      params.fixed_ns = decode_floor_ns_;
      params.timed_feature = BatchFeature::decode_seqs;
      params.ns_per_unit = decode_ns_per_sequence_head_ * static_cast<double>(shard.cache_heads);
      params.fixed_bound = PriceBound::attention_floor;
      params.fixed_parameter =
          "hardware.decode_attention_floor_us, hardware.decode_attention_us_per_sequence_head";
      break;
    default:
      break;
  }
}

}  // namespace exitsim::sim
