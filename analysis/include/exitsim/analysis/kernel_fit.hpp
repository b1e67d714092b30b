#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exitsim/analysis/gpu_fidelity.hpp"
#include "exitsim/core/hardware.hpp"

namespace exitsim::analysis {

// The roofline's kernel corrections (KernelCorrections and the link's latencies and efficiencies)
// fitted to one GPU's measured per-op times in Vidur's formats (docs/calibration.md, "Fit the
// kernel corrections"): each parameter minimises the mean squared log ratio exitsim / measured of
// the op family it governs, priced exactly as the GPU-fidelity comparison prices them
// (gpu_fidelity::compare_profile), by coordinate descent (golden-section search per parameter,
// two rounds):
//   GEMMs + element-wise ops  min_kernel_ns, ridge_exponent, elementwise_efficiency
//   decode attention          decode_attention_floor_ns, decode_attention_ns_per_sequence_head
//   prefill attention         prefill_attention_efficiency
//   all-reduce                link_latency, link_efficiency
//   send/recv in one node     send_latency, send_efficiency
//   send/recv across nodes    node_link_latency, node_link_efficiency
// at the cost model's default efficiencies. A family the files do not measure keeps `base`'s
// values, and the report says so.
struct KernelFit {
  HardwareSpec hardware;  // `base` with the fitted values
  // Per family: points, median ratio and share within 0.75-1.33 before (base) and after; and
  // what was kept. One line each, for the console.
  std::vector<std::string> report;
};
KernelFit fit_kernel_corrections(const gpu_fidelity::ProfileFiles& files, const HardwareSpec& base);

// A scenario's `hardware:` section holding the fit's corrections on its preset `preset`, with
// comments naming the files fitted and the fit's report (before and after, what was kept, values
// cut at their search interval's edge): what `calibrate --fit-hardware` writes.
std::string kernel_corrections_yaml(const KernelFit& fit, const std::string& preset,
                                    const gpu_fidelity::ProfileFiles& files);

// What a written hardware section says of itself in its comments, and what it holds beside the
// kernel corrections and the link's terms.
struct HardwareSectionNotes {
  std::string title;                // the first comment line
  std::vector<std::string> inputs;  // the files fitted, one comment line each
  std::string report_heading;
  std::vector<std::string> report;  // the fit's report, one comment line each
  std::string usage;                // the last comment line: how to use the section
  std::string preset;               // the section's hardware.preset; "" writes none
  // Given: hardware.launch_overhead_us and a cost_model: section with these efficiencies too.
  struct Efficiencies {
    double flops = 0, bandwidth = 0;
  };
  std::optional<Efficiencies> efficiencies;
};
// The section `fitted` gives: what kernel_corrections_yaml and `calibrate --against` write.
std::string hardware_section_yaml(const HardwareSpec& fitted, const HardwareSectionNotes& notes);

}  // namespace exitsim::analysis
