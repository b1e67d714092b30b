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
