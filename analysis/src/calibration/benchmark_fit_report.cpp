// calibrate --against's report and the section it writes (benchmark_fit.cpp fits).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "exitsim/analysis/benchmark_fit.hpp"
#include "exitsim/analysis/kernel_fit.hpp"

namespace exitsim::analysis {
namespace {

std::string signed_percent(double simulated, double measured) {
  return fmt::format("{:+.1f}%", 100 * (simulated / measured - 1));
}

std::string run_name(const FitRun& run) {
  return fmt::format("{} at {}", run.file,
                     run.request_rate ? fmt::format("{:.4g} req/s", *run.request_rate)
                                      : std::string("request rate inf"));
}

// "ttft_p50_ms" -> "TTFT", "throughput_tokens_per_s" -> "throughput".
std::string short_name(const std::string& figure) {
  if (figure.starts_with("throughput"))
    return "throughput";
  std::string out = figure.substr(0, figure.find('_'));
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<std::string> benchmark_fit_report(const BenchmarkFit& fit) {
  std::vector<std::string> out;
  for (const FittedValue& v : fit.values) {
    // A search that found nothing better leaves the value where it was: said as such.
    if (std::abs(v.after - v.before) <= 1e-9 * std::max(1.0, std::abs(v.before))) {
      out.push_back(fmt::format(
          "fitted {}: stays {:.4g}: no other value of its interval fits better", v.key, v.before));
    } else {
      out.push_back(fmt::format("fitted {}: {:.4g} -> {:.4g}", v.key, v.before, v.after));
    }
  }
  for (const std::string& line : fit.not_fitted)
    out.push_back("not fitted " + line);
  for (const std::string& line : fit.notes)
    out.push_back("note: " + line);
  out.push_back(fmt::format(
      "loss (mean squared log ratio simulated / measured over the {} figures of the fitting runs): "
      "{:.4g} before, {:.4g} after",
      fit.fitted_figures, fit.loss_before, fit.loss_after));
  // The fitting runs first, the held-out ones (the figure of merit) last.
  for (const bool held_out : {false, true}) {
    for (const FitRun& run : fit.runs) {
      if (run.held_out != held_out)
        continue;
      out.push_back(fmt::format("{} ({}): measured, simulated before and after (error)",
                                run_name(run), held_out ? "held out" : "fitted on"));
      for (const FitFigure& f : run.figures) {
        out.push_back(fmt::format("  {:<24} {:>10.4g}  {:>10.4g} ({})  {:>10.4g} ({})", f.name,
                                  f.measured, f.before, signed_percent(f.before, f.measured),
                                  f.after, signed_percent(f.after, f.measured)));
      }
    }
  }
  for (const FitRun& run : fit.runs) {
    if (!run.held_out)
      continue;
    std::string errors;
    for (const FitFigure& f : run.figures) {
      errors +=
          fmt::format("{}{} {} -> {}", errors.empty() ? "" : ", ", short_name(f.name),
                      signed_percent(f.before, f.measured), signed_percent(f.after, f.measured));
    }
    out.push_back(fmt::format("held out {}: errors before -> after: {}", run_name(run), errors));
  }
  return out;
}

std::string benchmark_fit_yaml(const BenchmarkFit& fit, std::span<const std::string> files,
                               const std::string& scenario_file) {
  HardwareSectionNotes notes;
  notes.title = fmt::format(
      "Roofline parameters fitted by exitsim calibrate --against (docs/calibration.md, \"Fit to "
      "your own benchmark runs\") on the scenario {} to:",
      scenario_file);
  notes.inputs.assign(files.begin(), files.end());
  notes.report_heading = "The fit (figures measured, simulated before and after, per run):";
  notes.report = benchmark_fit_report(fit);
  notes.usage = fmt::format(
      "Lay it over the scenario (exitsim validate {} --against RESULT --overlay THIS_FILE prints "
      "both), or paste its sections into it.",
      scenario_file);
  notes.preset = fit.fitted.hardware.preset;
  notes.efficiencies = HardwareSectionNotes::Efficiencies{
      fit.fitted.cost_model.flops_efficiency, fit.fitted.cost_model.bandwidth_efficiency};
  return hardware_section_yaml(fit.fitted.hardware.spec, notes);
}

}  // namespace exitsim::analysis
