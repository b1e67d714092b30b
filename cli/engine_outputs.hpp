#pragma once

// What an engine run writes: the token trace, and with --profile-dir the op trace (host spans and,
// on the GPU, CUPTI's), steps.csv and run.json; and how the run was taken.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/backend.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/op_timing.hpp"
#include "exitsim/profiler/host_profiler.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::engine {
class CudaModel;  // only defined in a build with CUDA
}

namespace exitsim::cli {

// How a measured run was taken: the speed probe before and after it, the warm-up, and the
// OpenMP wait policy in force (the environment's OMP_WAIT_POLICY, or "default"). run.json and
// validation.json record them.
struct RunConditions {
  engine::SpeedProbe probe_start;
  engine::SpeedProbe probe_end;
  int warmup_requests = 0;
  std::string omp_wait_policy;
};
std::string omp_wait_policy();
// The build that measured: compiler, optimisation and sanitizers ("g++ 12.2.0, optimised"). A
// debug or sanitized build times the engine several times slower: run.json and the profile
// record it, and `validate` refuses a profile of another build.
std::string build_description();
// Every kept token's exit (discarded tokens left out), tagged with `policy`: the rows of
// token_trace.csv, and what validation measures the run's request metrics from.
std::vector<traces::TokenTraceRow> token_trace_rows(const engine::EngineRun& run,
                                                    const std::string& policy);
void write_token_trace(std::span<const traces::TokenTraceRow> rows, const std::string& path);
// adaptive_threshold: the estimator's refit attempts (EngineRun::threshold_trajectory) as
// threshold_trajectory.csv (docs/engine.md, "adaptive_threshold"), and the console's summary of
// them (which says when the strategy gives the estimator no pairs, so the threshold stays).
void write_threshold_trajectory(std::span<const engine::ThresholdTrajectoryPoint> trajectory,
                                const std::string& path);
void print_threshold_summary(const engine::EngineRun& run, double initial_threshold,
                             policy::SyncStrategy strategy);
// op_trace.csv, op_trace.json, steps.csv and run.json of a profiled run in `dir`.
// A GPU run's CUPTI trace, sharing the host profiler's clock: attached to the CUDA model while
// it lives when both are given; otherwise it records nothing.
class DeviceTrace {
 public:
  DeviceTrace(engine::CudaModel* cuda_model, const profiler::HostProfiler* profiler);
  ~DeviceTrace();
  DeviceTrace(const DeviceTrace&) = delete;
  DeviceTrace& operator=(const DeviceTrace&) = delete;
  // The joined rows gathered so far (none on the CPU).
  std::vector<traces::OpTraceRow> take();
  // What the last take() joined, e.g. "412 of 412 device records attributed ..."; "" on the CPU.
  const std::string& summary() const { return summary_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string summary_;
};

// `device_rows`: the CUPTI tracer's rows of a GPU run (merged with the host spans by start).
void write_profile(const profiler::HostProfiler& profiler, const engine::EngineRun& run,
                   const engine::Backend& backend, const std::string& dir,
                   const RunConditions& conditions,
                   std::vector<traces::OpTraceRow> device_rows = {});
// run.json (what produced a measurement, so that a profile calibrated from it prices only this
// engine, backend, hardware and model; docs/calibration.md) at `path`.
void write_run_description(const engine::Backend& backend, const RunConditions& conditions,
                           const std::string& path);

}  // namespace exitsim::cli
