#include "engine_outputs.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/chrome_trace.hpp"

#if EXITSIM_HAVE_CUDA
#include "exitsim/engine/cuda_model.hpp"
#endif

namespace exitsim::cli {

#if EXITSIM_HAVE_CUDA
struct DeviceTrace::State {
  engine::CudaModel* model = nullptr;
  std::unique_ptr<profiler::CuptiTracer> tracer;
};

DeviceTrace::DeviceTrace(engine::CudaModel* cuda_model, const profiler::HostProfiler* profiler)
    : state_(std::make_unique<State>()) {
  if (cuda_model == nullptr || profiler == nullptr || !profiler->enabled())
    return;
  state_->model = cuda_model;
  state_->tracer = std::make_unique<profiler::CuptiTracer>(
      profiler::CuptiTracerOptions{.origin = profiler->origin()});
  state_->model->set_tracer(state_->tracer.get());
}

DeviceTrace::~DeviceTrace() {
  if (state_->model != nullptr)
    state_->model->set_tracer(nullptr);
}

std::vector<traces::OpTraceRow> DeviceTrace::take() {
  if (state_->tracer == nullptr)
    return {};
  std::vector<traces::OpTraceRow> rows = state_->tracer->take_rows();
  summary_ = profiler::describe(state_->tracer->last_join());
  return rows;
}
#else
struct DeviceTrace::State {};

DeviceTrace::DeviceTrace(engine::CudaModel*, const profiler::HostProfiler*) {}
DeviceTrace::~DeviceTrace() = default;
std::vector<traces::OpTraceRow> DeviceTrace::take() {
  return {};
}
#endif

namespace {

// steps.csv: the requests of every engine step, so each op of the op trace (by its step id)
// maps to the requests it served.
void write_steps(const engine::EngineRun& run, const std::string& path) {
  traces::detail::AtomicOutputFile file(path);
  file.write("step_id,start_ns,prefill_request_ids,decode_request_ids\n");
  const auto ids = [](const std::vector<RequestId>& requests) {
    std::string out;
    for (const RequestId id : requests)
      out += (out.empty() ? "" : ";") + std::to_string(id.value);
    return out;
  };
  for (const engine::StepRecord& step : run.steps) {
    file.write(
        fmt::format("{},{},{},{}\n", step.step, step.start, ids(step.prefill), ids(step.decode)));
  }
  file.finish();
}

}  // namespace

void write_run_description(const engine::Backend& backend, const RunConditions& conditions,
                           const std::string& path) {
  const ModelShape& shape = backend.config().shape;
  const auto probe = [](const engine::SpeedProbe& p) {
    return nlohmann::json{{"median_us", p.median_us}, {"p10_us", p.p10_us}, {"p90_us", p.p90_us}};
  };
  const nlohmann::json run = {
      {"engine", "exitsim-engine"},
      {"backend", backend.name()},
      {"hardware", backend.hardware()},
      {"model", shape.name},
      {"model_shape", sim::model_fingerprint(shape)},
      {"speed_probe",
       {{"start", probe(conditions.probe_start)}, {"end", probe(conditions.probe_end)}}},
      {"warmup_requests", conditions.warmup_requests},
      {"omp_wait_policy", conditions.omp_wait_policy},
      {"build", build_description()}};
  traces::write_file_atomically(path, run.dump(2) + "\n");
}

std::string build_description() {
#if defined(__clang__)
  std::string out = std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  std::string out = std::string("g++ ") + __VERSION__;
#else
  std::string out = "unknown compiler";
#endif
#ifdef NDEBUG
  out += ", optimised";
#else
  out += ", debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
  out += ", AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  out += ", AddressSanitizer";
#endif
#endif
  return out;
}

std::string omp_wait_policy() {
  const char* value = std::getenv("OMP_WAIT_POLICY");
  return value != nullptr && *value != '\0' ? value : "default";
}

std::vector<traces::TokenTraceRow> token_trace_rows(const engine::EngineRun& run,
                                                    const std::string& policy) {
  std::vector<traces::TokenTraceRow> rows;
  rows.reserve(run.tokens.size());
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.discarded)
      continue;
    traces::TokenTraceRow& row = rows.emplace_back();
    row.request_id = t.request.value;
    row.position = t.position;
    row.exit_depth = t.exit_depth;
    row.exit_point = t.exit_point;
    row.score = t.score;
    row.policy = policy;
    row.time_ns = t.time;
    row.confidences = t.confidences;
    row.agreements = t.agreements;
  }
  return rows;
}

void write_token_trace(std::span<const traces::TokenTraceRow> rows, const std::string& path) {
  traces::TokenTraceWriter writer(path);
  for (const traces::TokenTraceRow& row : rows)
    writer.write(row);
  writer.finish();
}

void write_threshold_trajectory(std::span<const engine::ThresholdTrajectoryPoint> trajectory,
                                const std::string& path) {
  // The simulator's file (docs/exit_policies.md, "adaptive_threshold"): the engine is replica 0
  // and its steps are numbered as the simulator's are.
  sim::AdaptiveThresholdSummary summary;
  for (const engine::ThresholdTrajectoryPoint& point : trajectory) {
    summary.trajectory.push_back(
        sim::trajectory_row(static_cast<std::int64_t>(point.step), point.time, 0, point.refit));
  }
  std::ostringstream text;
  sim::write_threshold_trajectory(text, summary);
  traces::detail::AtomicOutputFile file(path);
  file.write(text.str());
  file.finish();
}

void print_threshold_summary(const engine::EngineRun& run, double initial_threshold,
                             policy::SyncStrategy strategy) {
  if (strategy != policy::SyncStrategy::deferred_fill) {
    fmt::print(
        "threshold  stays at {} under strategy {}: the estimator learns only from deferred_fill's "
        "parallel passes (FREE's synchronized parallel decoding)\n",
        initial_threshold, policy::to_string(strategy));
    return;
  }
  std::int64_t fitted = 0;
  for (const engine::ThresholdTrajectoryPoint& point : run.threshold_trajectory)
    fitted += point.refit.fitted ? 1 : 0;
  const double final_threshold = run.threshold_trajectory.empty()
                                     ? initial_threshold
                                     : run.threshold_trajectory.back().refit.threshold;
  fmt::print(
      "threshold  {:.4g} -> {:.4g} after {} refit attempts ({} fitted) on {} calibration pairs\n",
      initial_threshold, final_threshold, run.threshold_trajectory.size(), fitted,
      run.calibration_pairs);
}

void write_profile(const profiler::HostProfiler& profiler, const engine::EngineRun& run,
                   const engine::Backend& backend, const std::string& dir,
                   const RunConditions& conditions, std::vector<traces::OpTraceRow> device_rows) {
  write_run_description(backend, conditions, (std::filesystem::path(dir) / "run.json").string());
  write_steps(run, (std::filesystem::path(dir) / "steps.csv").string());
  const std::string csv = (std::filesystem::path(dir) / "op_trace.csv").string();
  {
    traces::OpTraceWriter writer(csv);
    if (device_rows.empty()) {
      profiler.write(writer);
    } else {
      std::vector<traces::OpTraceRow> rows = profiler.rows();
      rows.insert(rows.end(), std::make_move_iterator(device_rows.begin()),
                  std::make_move_iterator(device_rows.end()));
      std::stable_sort(rows.begin(), rows.end(),
                       [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
      for (const traces::OpTraceRow& row : rows)
        writer.write(row);
    }
    writer.finish();
  }
  traces::OpTraceReader reader(csv);
  traces::ChromeTraceWriter chrome((std::filesystem::path(dir) / "op_trace.json").string(),
                                   {256LL << 20});
  traces::write_op_trace_as_chrome(reader, chrome);
  chrome.finish();
}

}  // namespace exitsim::cli
