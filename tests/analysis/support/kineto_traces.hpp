#pragma once
// Kineto traces for the calibrate --kineto tests: read (gzipped or not) as JSON to vary them, and
// the model a steps.json beside a trace records having run.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/cost_model.hpp"

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

}  // namespace exitsim::test_support
