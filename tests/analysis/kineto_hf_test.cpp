// `calibrate --kineto` on real Hugging Face models: transformers' own Llama-3, Qwen3 (QK-norm),
// Gemma-2 (four norms, GELU-tanh, soft-capping, sliding window, eager attention) and Mixtral
// (router and experts, by grouped GEMM and by the per-expert loop), and a Llama-3 base model
// without an LM head, profiled by training/hf_kineto_traces.py on this machine class
// (tests/analysis/data/kineto/hf, README there). Each model's prefill and decode traces calibrate
// one profile with every third step held out (its ProfilerStep range removed, so the import never
// sees it); the profile then prices the held-out steps against their measured wall time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/kineto_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::TempDir;

const std::string k_hf = std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/hf/";

nlohmann::json read_steps(const std::string& phase) {
  std::ifstream in(k_hf + phase + ".steps.json");
  return nlohmann::json::parse(in);
}

struct HeldOut {
  KinetoCalibration imported;
  ModelShape shape;  // as the generator ran it (its config), not as the import read it
  std::vector<double> errors;
  double median = 0;
};

// Calibrates from `phases` (e.g. llama3.prefill and llama3.decode) without every third step
// (ProfilerStep#3, #6, ...), then prices each of those against its wall time under the profiler
// (the steps.json's profiled_ms: perf_counter around the step). `emits`: whether the steps ran an
// LM head (a base model's do not, and are priced without one).
HeldOut held_out(const std::vector<std::string>& phases, bool emits) {
  TempDir dir;
  HeldOut out;
  std::vector<std::string> paths;
  std::vector<nlohmann::json> kept_out;
  for (const std::string& phase : phases) {
    const nlohmann::json steps = read_steps(phase);
    out.shape = test_support::recorded_hf_shape(steps);
    std::set<int> dropped;
    for (std::size_t i = 0; i < steps["calibration"].size(); ++i) {
      if (i % 3 == 2) {
        dropped.insert(static_cast<int>(i) + 1);  // ProfilerStep#1 is the first step
        kept_out.push_back(steps["calibration"][i]);
      }
    }
    const nlohmann::json trace = test_support::without_steps(
        test_support::read_trace_json(k_hf + phase + ".kineto.json.gz"), dropped);
    paths.push_back(dir.write(phase + ".json", trace.dump()));
  }
  out.imported = calibrate_kineto(paths, {});
  sim::ParallelPricing pricing;
  pricing.hardware = *find_hardware_preset("h100-sxm");  // prices a base model's head only
  const sim::CalibratedCostModel priced(out.imported.profile, paths.front(), out.shape, pricing);
  for (const nlohmann::json& step : kept_out) {
    const double predicted_ms =
        static_cast<double>(
            priced.iteration_cost(test_support::recorded_batch(step, out.shape, emits)).total) /
        1e6;
    out.errors.push_back(std::abs(predicted_ms / step["profiled_ms"].get<double>() - 1));
  }
  out.median = test_support::median(out.errors);
  return out;
}

void report(const std::string& model, const HeldOut& h) {
  std::string each;
  for (const double e : h.errors)
    each += (each.empty() ? "" : ", ") + std::to_string(static_cast<int>(std::lround(100 * e)));
  std::printf("%s: %zu held-out steps, median error %.1f%% (each: %s%%)\n", model.c_str(),
              h.errors.size(), 100 * h.median, each.c_str());
  ::testing::Test::RecordProperty("median_held_out_error", std::to_string(h.median));
}

// The bound. The traces were recorded on this project's shared 2-core machine under load: a step
// held the core for 38-68% of its wall time (the README's CPU/wall column), so operators' and
// steps' wall times include waits for the core, and a step's wall time varies by tens of percent
// between runs (Llama-3's decode of 4 x 128: 212 ms under the profiler, 179 ms without, 73 ms of
// CPU). A held-out step is one such measurement, priced from fits of others. Measured medians
// (printed by each test): 15.0% (Llama-3), 8.1% (Qwen3), 8.5% (Gemma-2), 5.6% and 11.1% (Mixtral,
// grouped and looped experts), 10.3% (the base model); 20% bounds them with the machine's spread,
// under the 25% at which calibrate distrusts a fit. The traces are committed: the figures are
// fixed until they are regenerated.
constexpr double k_bound = 0.20;

TEST(KinetoHf, Llama3PricesItsHeldOutSteps) {
  const HeldOut h = held_out({"llama3.prefill", "llama3.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d4096 h32/8x128 ffn14336 v32000 gated depth 2+0x0+0 lora -");
  report("llama3", h);
  EXPECT_LE(h.median, k_bound);
}

// Qwen3's q_norm and k_norm sit between the projections and the attention: they are rotary's.
TEST(KinetoHf, Qwen3WithQkNormPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"qwen3.prefill", "qwen3.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  report("qwen3", h);
  EXPECT_LE(h.median, k_bound);
}

// Gemma-2: eager attention (matmul, scaling, soft-capping, mask, softmax, matmul), four norms a
// layer, GELU-tanh, and layers that differ only by the sliding window's two slices.
TEST(KinetoHf, Gemma2PricesItsHeldOutSteps) {
  const HeldOut h = held_out({"gemma2.prefill", "gemma2.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  report("gemma2", h);
  EXPECT_LE(h.median, k_bound);
}

// Mixtral's experts by transformers 5's grouped GEMM: a router, top-2, and two _grouped_mm.
TEST(KinetoHf, MixtralGroupedExpertsPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"mixtral.prefill", "mixtral.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d1024 h32/8x128 ffn3584 v32000 gated depth 2+0x0+0 lora - moe 8x2");
  report("mixtral", h);
  EXPECT_LE(h.median, k_bound);
}

// Mixtral's experts one by one (transformers 4's loop): as many linears as experts hit.
TEST(KinetoHf, MixtralLoopedExpertsPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"mixtral-eager.prefill", "mixtral-eager.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  report("mixtral-eager", h);
  EXPECT_LE(h.median, k_bound);
}

// A base model (LlamaModel, no LM head): its steps map, the profile has no head, and the held-out
// steps, which ran none, are priced without one.
TEST(KinetoHf, ABaseModelWithoutLmHeadPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"llama3-base.mixed"}, false);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.find("lm_head"), nullptr);
  EXPECT_EQ(h.imported.profile.find("sampling"), nullptr);
  report("llama3-base", h);
  EXPECT_LE(h.median, k_bound);
}

}  // namespace
}  // namespace exitsim::analysis
