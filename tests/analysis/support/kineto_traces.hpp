#pragma once
// Kineto traces for the calibrate --kineto tests: read (gzipped or not) as JSON to vary them, and
// the model a steps.json beside a trace records having run.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "support/test_files.hpp"

namespace exitsim::test_support {

// The whole trace at `path` (gzip or plain JSON).
nlohmann::json read_trace_json(const std::string& path);

// `trace` without the "ProfilerStep#<n>" ranges of the steps `n` in `dropped`: their operators
// fall in no step, so calibration never sees them (the held-out steps of a test).
nlohmann::json without_steps(nlohmann::json trace, const std::set<int>& dropped);

// The model a generator's <model>.<phase>.steps.json records (its "config": Hugging Face keys),
// with `layers` decoder layers; a mixture's experts and top-k where it has them.
ModelShape recorded_hf_shape(const nlohmann::json& steps);

// The simulator's batch for one recorded step: `batch` sequences each prefilling its
// `prompt_tokens`, or each decoding one token over its `context`, at full depth.
std::vector<sim::BatchEntry> recorded_batch(const nlohmann::json& step, const ModelShape& shape,
                                            bool emits_token);

double median(std::vector<double> values);

// A calibration with every third step held out, and its pricing of those steps.
struct HeldOutPricing {
  analysis::KinetoCalibration imported;
  std::vector<double> errors;  // |predicted / measured - 1| of each held-out step
  double median = 0;
};

// Calibrates from `phases` (e.g. llama3.prefill and llama3.decode: <folder><phase>.kineto.json.gz
// and .steps.json) without every third step (ProfilerStep#3, #6, ...: their ranges removed, so the
// import never sees them), then prices each of those, as `shape` at full depth, against its wall
// time under the profiler (the steps.json's profiled_ms: perf_counter around the step).
// `emits`: whether the steps ran an LM head (a base model's do not, and are priced without one).
// `head_on_every_position`: the framework ran the LM head on every prompt token, not one row per
// sequence as the simulator prices it (LitGPT); a prefill step's prediction then adds the
// profile's lm_head fit on its other rows, which calibrate names as in no simulated step.
HeldOutPricing price_held_out_steps(const std::string& folder,
                                    const std::vector<std::string>& phases, const ModelShape& shape,
                                    bool emits, bool head_on_every_position = false);

// Prints the held-out errors (the figures a bound is set from) and records their median.
void report_held_out(const std::string& model, const HeldOutPricing& h);

// tests/analysis/data/kineto/gpu_plain.kineto.json.gz (make_gpu_fixture.py): a one-layer model's
// 12 decode steps on a GPU, each operator's kernel a known line in the batch.
nlohmann::json gpu_fixture();

// Writes `trace` as `name` in `dir` and calibrates from it.
analysis::KinetoCalibration import_json(const TempDir& dir, const std::string& name,
                                        const nlohmann::json& trace);

// Applies `change` to every event (in place), and inserts what it returns after each one.
template <typename Change>
nlohmann::json rewrite(nlohmann::json trace, Change change) {
  nlohmann::json events = nlohmann::json::array();
  for (nlohmann::json& e : trace["traceEvents"]) {
    events.push_back(e);
    for (nlohmann::json& extra : change(events.back()))
      events.push_back(std::move(extra));
  }
  trace["traceEvents"] = std::move(events);
  return trace;
}

// The steps a calibration mapped: its embedding's calls.
std::int64_t steps_mapped(const analysis::KinetoCalibration& imported);

}  // namespace exitsim::test_support
