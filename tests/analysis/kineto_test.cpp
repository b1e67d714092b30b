// `calibrate --kineto` on real PyTorch measurements: traces that training/kineto_traces.py
// recorded with Debian's python3-torch on this machine class (tests/analysis/data/kineto), with
// PyTorch's own wall time per step beside them, including held-out steps of shapes the traces do
// not contain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::analysis {
namespace {

const std::string k_data = std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/";

nlohmann::json read_steps(const std::string& model) {
  std::ifstream in(k_data + model + ".steps.json");
  return nlohmann::json::parse(in);
}

// The model the script ran, from its own record (not from the trace).
ModelShape recorded_shape(const nlohmann::json& steps) {
  const nlohmann::json& s = steps["shape"];
  ModelShape shape;
  shape.name = steps["model"].get<std::string>();
  shape.d_model = s["d_model"];
  shape.n_heads = s["n_heads"];
  shape.n_kv_heads = s["n_kv_heads"];
  shape.head_dim = s["head_dim"];
  shape.ffn_dim = s["ffn_dim"];
  shape.vocab = s["vocab"];
  shape.mlp = MlpKind::gated;
  shape.depth.prelude_layers = s["prelude"];
  shape.depth.block_layers = s["block"];
  shape.depth.recursions = s["recursions"];
  shape.depth.coda_layers = s["coda"];
  return shape;
}

// The simulator's batch for one recorded step: `batch` sequences each prefilling its prompt, or
// each decoding one token over its context, at full depth.
std::vector<sim::BatchEntry> batch_of(const nlohmann::json& step, const ModelShape& shape) {
  const bool prefill = step["kind"] == "prefill";
  sim::BatchEntry entry;
  entry.query_tokens = prefill ? step["prompt_tokens"].get<std::int64_t>() : 1;
  entry.context_tokens = prefill ? 0 : step["context"].get<std::int64_t>();
  entry.depth = shape.depth.stacked_depth();
  entry.emits_token = true;
  return std::vector<sim::BatchEntry>(step["batch"].get<std::size_t>(), entry);
}

struct StepErrors {
  double median_profiled = 0;
  double median_unprofiled = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The calibrated model's price of each held-out step against PyTorch's wall time for it.
StepErrors held_out_errors(const std::string& model) {
  const nlohmann::json steps = read_steps(model);
  const ModelShape shape = recorded_shape(steps);
  const std::vector<std::string> traces = {k_data + model + ".kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {});
  const sim::CalibratedCostModel priced(imported.profile, traces.front(), shape);
  std::vector<double> profiled;
  std::vector<double> unprofiled;
  for (const nlohmann::json& step : steps["held_out"]) {
    const double predicted_ms =
        static_cast<double>(priced.iteration_cost(batch_of(step, shape)).total) / 1e6;
    profiled.push_back(std::abs(predicted_ms / step["profiled_ms"].get<double>() - 1));
    unprofiled.push_back(std::abs(predicted_ms / step["unprofiled_ms"].get<double>() - 1));
  }
  return {median(profiled), median(unprofiled)};
}

TEST(Kineto, RecoversTheTinyRecursiveModelsShapeAndEveryLayerCall) {
  const nlohmann::json steps = read_steps("tiny");
  const std::vector<std::string> traces = {k_data + "tiny.kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {});
  const sim::CostProfile& profile = imported.profile;
  EXPECT_EQ(profile.source.model_shape, sim::model_fingerprint(recorded_shape(steps)));
  EXPECT_EQ(profile.source.model_shape, "d192 h6/2x32 ffn512 v256 gated depth 1+1x4+1 lora -");
  EXPECT_EQ(profile.source.engine, steps["framework"].get<std::string>());
  EXPECT_EQ(profile.source.backend, "cpu");
  // 24 steps of 6 executed layers (1 + 1 x 4 + 1): 8 prefill, 16 decode.
  std::int64_t prefill_steps = 0;
  std::int64_t prefill_tokens_max = 0;
  std::int64_t decode_batch_max = 0;
  std::int64_t decode_pairs_max = 0;
  for (const nlohmann::json& step : steps["calibration"]) {
    const std::int64_t batch = step["batch"];
    if (step["kind"] == "prefill") {
      ++prefill_steps;
      prefill_tokens_max =
          std::max(prefill_tokens_max, batch * step["prompt_tokens"].get<std::int64_t>());
    } else {
      decode_batch_max = std::max(decode_batch_max, batch);
      decode_pairs_max =
          std::max(decode_pairs_max, batch * (step["context"].get<std::int64_t>() + 1));
    }
  }
  const auto decode_steps = static_cast<std::int64_t>(steps["calibration"].size()) - prefill_steps;
  for (const std::string_view op : traces::engine_ops::layer) {
    SCOPED_TRACE(std::string(op));
    const sim::OpFit* decode = profile.find(std::string(op));
    const sim::OpFit* prefill = profile.find(std::string(op) + ".prefill");
    ASSERT_NE(decode, nullptr);
    ASSERT_NE(prefill, nullptr);
    EXPECT_EQ(decode->samples + decode->held_out, decode_steps * 6);
    EXPECT_EQ(prefill->samples + prefill->held_out, prefill_steps * 6);
    EXPECT_EQ(decode->batch_max_seen, decode_batch_max);
    EXPECT_EQ(prefill->batch_max_seen, prefill_tokens_max);
    EXPECT_EQ(decode->context_max_seen, decode_pairs_max);
  }
  const sim::OpFit* embed = profile.find("embed");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->samples + embed->held_out, 24);
  EXPECT_EQ(embed->batch_max_seen, prefill_tokens_max);
  ASSERT_NE(profile.find("lm_head"), nullptr);
  EXPECT_EQ(profile.find("lm_head")->batch_max_seen, decode_batch_max);
  ASSERT_NE(profile.find("step.residual"), nullptr);
}

TEST(Kineto, RecoversTheRandomPlainModelsShape) {
  const nlohmann::json steps = read_steps("random");
  const std::vector<std::string> traces = {k_data + "random.kineto.json.gz"};
  const KinetoCalibration imported = calibrate_kineto(traces, {"my machine", "my-model"});
  EXPECT_EQ(imported.profile.source.model_shape, sim::model_fingerprint(recorded_shape(steps)));
  EXPECT_EQ(imported.profile.source.model_shape,
            "d768 h12/4x64 ffn2048 v4096 gated depth 4+0x0+0 lora -");
  EXPECT_EQ(imported.profile.source.hardware, "my machine");
  EXPECT_EQ(imported.profile.source.model, "my-model");
}

// The target (docs/calibration.md): the calibrated model's price of steps it never saw within
// 10% of PyTorch's measured step time, at the median.
TEST(Kineto, PredictsHeldOutStepsOfTheTinyModel) {
  const StepErrors e = held_out_errors("tiny");
  RecordProperty("median_error_profiled", std::to_string(e.median_profiled));
  RecordProperty("median_error_unprofiled", std::to_string(e.median_unprofiled));
  std::printf("tiny: held-out steps' median error %.1f%% (profiled), %.1f%% (unprofiled)\n",
              100 * e.median_profiled, 100 * e.median_unprofiled);
  EXPECT_LE(e.median_profiled, 0.10);
}

TEST(Kineto, PredictsHeldOutStepsOfTheRandomModel) {
  const StepErrors e = held_out_errors("random");
  std::printf("random: held-out steps' median error %.1f%% (profiled), %.1f%% (unprofiled)\n",
              100 * e.median_profiled, 100 * e.median_unprofiled);
  EXPECT_LE(e.median_profiled, 0.10);
}

}  // namespace
}  // namespace exitsim::analysis
