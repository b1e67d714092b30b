// `calibrate --kineto`: PyTorch-profiler traces in, a cost profile out.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/error.hpp"
#include "kineto_events.hpp"
#include "kineto_layers.hpp"
#include "parts.hpp"

namespace exitsim::analysis {

KinetoCalibration calibrate_kineto(std::span<const std::string> paths, const KinetoNames& names,
                                   const CalibrationOptions& options) {
  if (paths.empty())
    throw InputError({"", 0, 0, "--kineto"}, expected_found("at least one trace", "none"));
  Samples samples;
  std::vector<TraceStep> steps;
  kineto::ImportReport report;
  KinetoCalibration out;
  sim::ProfileSource& source = out.profile.source;
  for (const std::string& path : paths) {
    const kineto::Trace trace = kineto::read_trace(path);
    const std::string framework =
        trace.framework.empty() ? "pytorch (version not recorded in the trace)" : trace.framework;
    const std::string backend = trace.gpu ? "cuda" : "cpu";
    std::string hardware = names.hardware.empty() ? trace.hardware : names.hardware;
    if (hardware.empty())
      hardware = "unknown (the trace names no device; give --hardware)";
    if (source.traces.empty()) {
      source.engine = framework;
      source.backend = backend;
      source.hardware = hardware;
      source.model =
          names.model.empty() ? std::filesystem::path(path).filename().string() : names.model;
      report.shape.name = source.model;
    } else {
      sim::ProfileSource other = source;
      other.engine = framework;
      other.backend = backend;
      other.hardware = hardware;
      other.traces = {path};
      same_source(source, other);
    }
    source.traces.push_back(path);
    kineto::map_trace(trace, samples, steps, report);
  }
  if (report.steps == 0) {
    throw InputError({paths.front(), 0, 0, "traceEvents"},
                     expected_found("steps with an embedding, transformer layers and an LM head",
                                    fmt::format("none of {} steps", report.skipped_steps)));
  }
  source.model_shape = sim::model_fingerprint(report.shape);
  fit_measurements(samples, {}, steps, options, out.profile);

  auto& lines = out.report;
  lines.push_back(
      fmt::format("model      {} ({} steps mapped, {} of them prefill; {} skipped: "
                  "no embedding, layer or LM head)",
                  source.model_shape, report.steps, report.prefill_steps, report.skipped_steps));
  double unmapped_us = 0;
  for (const auto& [name, use] : report.unmapped)
    unmapped_us += use.second;
  const auto share = [&](double us) {
    return report.step_us > 0 ? 100 * us / report.step_us : 0.0;
  };
  lines.push_back(fmt::format(
      "residual   {:.1f}% of step time is no mapped op: {:.1f}% unmapped operators, {:.1f}% "
      "between operators; both are in {}",
      share(unmapped_us + report.gap_us), share(unmapped_us), share(report.gap_us),
      "step.residual"));
  std::vector<std::pair<double, std::string>> largest;
  for (const auto& [name, use] : report.unmapped)
    largest.emplace_back(use.second,
                         fmt::format("{} ({} calls, {:.0f} us)", name, use.first, use.second));
  std::sort(largest.rbegin(), largest.rend());
  if (!largest.empty()) {
    std::string names_list;
    for (std::size_t i = 0; i < largest.size() && i < 5; ++i)
      names_list += (i ? ", " : "") + largest[i].second;
    lines.push_back("unmapped   " + names_list + (largest.size() > 5 ? ", ..." : ""));
  }
  if (report.unattributed_kernels > 0) {
    lines.push_back(fmt::format(
        "gpu        {} kernels ({:.0f} us) were launched by no top-level operator of the model "
        "thread ({} by CUDA graph replays, whose kernels cannot be told apart by operator); "
        "their time is in the step residual",
        report.unattributed_kernels, report.unattributed_gpu_us, report.graph_kernels));
  }
  return out;
}

}  // namespace exitsim::analysis
