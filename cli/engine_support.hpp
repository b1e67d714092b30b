#pragma once

// What the engine commands (engine run, engine eval, validate) share: loading a model, turning a
// scenario into engine requests and options, and the profile files of a run.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/engine/op_timing.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/profiler/host_profiler.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "scenario_options.hpp"

namespace CLI {
class App;
}

namespace exitsim::engine {
class CudaModel;  // only defined in a build with CUDA
}

namespace exitsim::cli {

// The model and the text its prompts (or evaluation windows) come from.
struct ModelOptions {
  std::string dir;
  std::vector<int> exit_layers;
  std::string text;
  std::string token_ids;
  std::string backend = "cpu";  // cpu or cuda
  std::string dtype = "fp32";   // the GPU backend's storage: fp32, fp16 or bf16
  int threads = 0;              // the CPU backend's OpenMP threads (0: the scenario's, else
                                // OpenMP's choice)
  bool pin = false;             // each of them bound to its own core (or the scenario's engine.pin)

  // --model is required unless `model_required` is false (the command then checks it itself).
  void add_to(CLI::App& command, bool model_required = true);

  // The prompts' tokens: the text through the byte tokenizer, or the token-id file.
  std::vector<std::int32_t> corpus(const engine::ModelConfig& config) const;
};

struct LoadedModel {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::Backend> model;
  // The same model when it runs on the GPU (to attach a CUPTI tracer); nullptr on the CPU.
  engine::CudaModel* cuda = nullptr;
};

struct RunArgs {
  ModelOptions model;
  ScenarioOptions scenario;
  std::string out;
  std::string profile;
  bool no_output = false;
  bool honour_arrivals = false;
  bool rollback = false;
  double temperature = 0;
  int warmup_requests = -1;  // decoded untimed before the measured run (-1: engine.warmup_requests)
};

// The scenario's engine.threads and engine.pin, where the command line set neither --threads nor
// --pin (load_model applied those); the CPU backend only.
void apply_scenario_threading(const ModelOptions& options, const scenario::Scenario& s);
// --warmup when given (>= 0), else the scenario's engine.warmup_requests.
int warmup_requests(int command_line, const scenario::Scenario& s);

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

// Refuses, before any work, an output folder that cannot be made: one of its existing ancestors
// (or the path itself) is not a directory. `option` names it ("--out").
void check_output_directory(const std::string& path, const std::string& option);
// For an output file: its folder can be created (checked before the work, as above), and is
// (made when the file is written, so a run that fails first leaves no folder behind).
void check_output_file_folder(const std::string& path, const std::string& option);
void make_output_file_folder(const std::string& path);
// The build that measured: compiler, optimisation and sanitizers ("g++ 12.2.0, optimised"). A
// debug or sanitized build times the engine several times slower: run.json and the profile
// record it, and `validate` refuses a profile of another build.
std::string build_description();

// Decodes the first `count` requests (all arriving at once) with `options` and throws the result
// away: the weights paged in, caches and the OpenMP team warm before anything is timed.
void warm_up_engine(const engine::Backend& backend, std::span<const engine::EngineRequest> requests,
                    engine::EngineOptions options, int count);

std::unique_ptr<LoadedModel> load_model(const ModelOptions& options);
std::vector<engine::EngineRequest> engine_requests(const scenario::Scenario& s,
                                                   const std::vector<std::int32_t>& corpus);
engine::EngineOptions engine_options(const scenario::Scenario& s, const RunArgs& args,
                                     std::int64_t longest);
// The most positions any of the requests needs (prompt and output), at least 1: what the CPU
// K/V pool is sized by when the scenario gives no kv_blocks.
std::int64_t longest_request(std::span<const engine::EngineRequest> requests);
// token_trace.csv: every kept token's exit (discarded tokens left out), tagged with `policy`.
void write_token_trace(const engine::EngineRun& run, const std::string& policy,
                       const std::string& path);
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
// The scenario's model section made to describe the engine's model, so that the scenario's exit
// policy is validated against the exit points the engine really has. The user's --set come
// after and win.
ScenarioOptions with_engine_model(const ScenarioOptions& options, const ModelShape& m);

}  // namespace exitsim::cli
