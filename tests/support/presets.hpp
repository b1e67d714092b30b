// The model and accelerator most cost-model tests price: Llama-3-8B on an H100 SXM, as presets,
// and the same accelerator as a bare roofline for the tests whose claim is the roofline's own
// arithmetic.
#pragma once

#include "exitsim/core/presets.hpp"

namespace exitsim::test_support {

inline const ModelShape& llama_3_8b() {
  static const ModelShape m = *find_model_preset("llama-3-8b");
  return m;
}

inline const HardwareSpec& h100() {
  static const HardwareSpec h = *find_hardware_preset("h100-sxm");
  return h;
}

// `hardware` without its kernel corrections (docs/cost_model.md, "Kernel corrections"): every op
// max(FLOPs / (peak x flops efficiency), bytes / (bandwidth x bandwidth efficiency)) plus a
// launch, collectives and hand-offs at the cost model's bandwidth efficiency of their link. The
// latencies stay the preset's: a collective's fixed link_latency, a hand-off's send_latency within
// a node and node_link_latency across nodes.
inline HardwareSpec bare_roofline(HardwareSpec hardware) {
  hardware.kernels = {};
  hardware.interconnect.link_efficiency = 0;
  hardware.interconnect.node_link_efficiency = 0;
  return hardware;
}

inline const HardwareSpec& bare_h100() {
  static const HardwareSpec h = bare_roofline(h100());
  return h;
}

}  // namespace exitsim::test_support
