// `calibrate --kineto`: PyTorch-profiler traces in, a cost profile out.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "kineto_events.hpp"
#include "kineto_map.hpp"
#include "parts.hpp"

namespace exitsim::analysis {
namespace {

// A tensor-parallel trace is one GPU's: its heads, K/V heads, vocabulary and MLP (each expert's)
// are its shard. The model is the shards times the degree.
ModelShape whole_model(ModelShape shard, int tensor_parallel) {
  shard.n_heads *= tensor_parallel;
  shard.n_kv_heads *= tensor_parallel;
  shard.vocab *= tensor_parallel;
  shard.ffn_dim *= tensor_parallel;
  return shard;
}

// What the import says about itself: mapped and skipped steps, the residual's parts, what was
// assumed or left to the roofline. One line each, for the console and the profile's notes.
std::vector<std::string> import_report(const kineto::ImportReport& report, int tensor_parallel,
                                       const std::string& fingerprint) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("model      {} ({} steps mapped, {} of them prefill; steps from {})",
                              fingerprint, report.steps, report.prefill_steps, report.step_source));
  if (report.skipped_steps > 0) {
    lines.push_back(fmt::format("skipped    {} of {} steps: {}", report.skipped_steps,
                                report.skipped_steps + report.steps,
                                kineto::skipped_summary(report)));
  }
  if (tensor_parallel > 1) {
    lines.push_back(fmt::format(
        "parallel   one GPU of {} (distributedInfo.world_size, with {} all-reduces in the "
        "layers): its heads, K/V heads, vocabulary and MLP width are the model's / {}; "
        "tp_all_reduce is fitted from the all-reduces",
        tensor_parallel, report.all_reduces, tensor_parallel));
  }
  if (report.headless_steps > 0) {
    lines.push_back(fmt::format(
        "head       {} of {} steps have no LM head (a base model, e.g. AutoModel): the profile "
        "has {}; simulations price the final norm, LM head and sampling by the roofline and say "
        "so",
        report.headless_steps, report.steps,
        report.headless_steps == report.steps ? "no lm_head and no sampling"
                                              : "lm_head and sampling from the other steps"));
  }
  if (report.every_position_head_steps > 0) {
    lines.push_back(fmt::format(
        "head       {} of {} steps ran the LM head on every position, not only each sequence's "
        "last (e.g. LitGPT's GPT.forward): lm_head is fitted per row, and a simulated step "
        "prices one row per sequence, so their head on the other rows ({:.1f} ms, {:.1f}% of "
        "those steps' time) is in no simulated step",
        report.every_position_head_steps, report.steps, report.every_position_head_extra_us / 1e3,
        100 * report.every_position_head_extra_us / report.every_position_head_step_us));
  }
  if (!report.graph_steps.empty()) {
    std::int64_t n = 0;
    std::string batches;
    for (const auto& [batch, steps] : report.graph_steps) {
      n += steps;
      batches += fmt::format("{}{}", batches.empty() ? "" : ", ", batch);
    }
    lines.push_back(fmt::format(
        "graph      {} decode steps ran as CUDA-graph replays (batches {}): fitted whole as "
        "step.graph against their sequences; simulations price decode-only iterations from it, "
        "by their sequences alone (a graph's attention context is in no shape)",
        n, batches));
  }
  for (const std::string& assumed : report.assumptions)
    lines.push_back("assumed    " + assumed);
  if (report.gpu_ran_past > 0) {
    lines.push_back(fmt::format(
        "gpu        {} of {} steps' kernels ended after their range on the CPU: their wall time "
        "runs to their last kernel's end",
        report.gpu_ran_past, report.steps));
  }
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
  return lines;
}

// Traces of prefill steps only: every layer op's calls are prefill calls, and the calibrated model
// needs decode fits for every iteration. The prefill calls are fitted under the ops' own names
// (a decode iteration priced from them is below the batches measured, and simulations say so);
// the steps' calls are pointed at the renamed samples.
Samples prefill_as_every_pass(const Samples& samples, std::vector<TraceStep>& steps) {
  namespace ops = traces::engine_ops;
  const auto plain = [](const std::string& name) {
    return name.ends_with(ops::prefill_suffix)
               ? name.substr(0, name.size() - ops::prefill_suffix.size())
               : name;
  };
  Samples out;
  for (const auto& [name, entry] : samples) {
    auto& target = out[plain(name)];
    target.first = entry.first;
    target.second.insert(target.second.end(), entry.second.begin(), entry.second.end());
  }
  for (TraceStep& step : steps) {
    for (auto& call : step.calls)
      call.first = &out.find(plain(*call.first))->first;
  }
  return out;
}

}  // namespace

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
    std::int64_t graph_steps = 0;
    for (const auto& [batch, count] : report.graph_steps)
      graph_steps += count;
    const std::string graphs =
        graph_steps > 0
            ? fmt::format(" ({} more ran as CUDA-graph replays, whose layers give no shape)",
                          graph_steps)
            : "";
    throw InputError(
        {paths.front(), 0, 0, "traceEvents"},
        expected_found("steps with an embedding and transformer layers",
                       fmt::format("none of {} steps{}{}", report.skipped_steps + graph_steps,
                                   report.skipped_steps > 0 ? ": " + kineto::skipped_summary(report)
                                                            : " (" + report.step_source + ")",
                                   graphs)));
  }
  // All-reduces in the layers of a multi-process job: tensor parallelism over its processes.
  const int tensor_parallel = report.all_reduces > 0 ? report.world_size : 1;
  const ModelShape model = whole_model(report.shape, tensor_parallel);
  source.model_shape = sim::model_fingerprint(model);
  source.tensor_parallel = tensor_parallel;
  const bool prefill_only = report.prefill_steps == report.steps;
  fit_measurements(prefill_only ? prefill_as_every_pass(samples, steps) : samples, {}, steps,
                   options, out.profile);
  out.report = import_report(report, tensor_parallel, source.model_shape);
  if (prefill_only) {
    out.report.insert(out.report.begin() + 1,
                      "prefill    every step mapped is a prefill: the layer ops are fitted from "
                      "prefill calls under their own names, and decode iterations are priced "
                      "from them (below the batches measured: extrapolated, said so when "
                      "simulated)");
  }
  out.profile.notes = out.report;
  return out;
}

}  // namespace exitsim::analysis
