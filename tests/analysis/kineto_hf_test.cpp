// `calibrate --kineto` on real Hugging Face models: transformers' own Llama-3, Qwen3 (QK-norm),
// Gemma-2 (four norms, GELU-tanh, soft-capping, sliding window, eager attention) and Mixtral
// (router and experts, by grouped GEMM and by the per-expert loop), and a Llama-3 base model
// without an LM head, profiled by training/hf_kineto_traces.py on this machine class
// (tests/analysis/data/kineto/hf, README there). Each model's prefill and decode traces calibrate
// one profile with every third step held out (its ProfilerStep range removed, so the import never
// sees it); the profile then prices the held-out steps against their measured wall time.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "exitsim/sim/cost/roofline.hpp"
#include "support/kineto_traces.hpp"

namespace exitsim::analysis {
namespace {

const std::string k_hf = std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/hf/";

struct HeldOut : test_support::HeldOutPricing {
  ModelShape shape;  // as the generator ran it (its config), not as the import read it
};

// `phases` calibrate with every third step held out (test_support::price_held_out_steps), priced
// as the model the first phase's steps.json records.
HeldOut held_out(const std::vector<std::string>& phases, bool emits) {
  std::ifstream in(k_hf + phases.front() + ".steps.json");
  HeldOut out;
  out.shape = test_support::recorded_hf_shape(nlohmann::json::parse(in));
  static_cast<test_support::HeldOutPricing&>(out) =
      test_support::price_held_out_steps(k_hf, phases, out.shape, emits);
  return out;
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
  // logits_to_keep=1: one head row per sequence, as the simulator prices it.
  for (const std::string& note : h.imported.profile.notes)
    EXPECT_EQ(note.find("every position"), std::string::npos) << note;
  test_support::report_held_out("llama3", h);
  EXPECT_LE(h.median, k_bound);
}

// Qwen3's q_norm and k_norm sit between the projections and the attention: they are rotary's, and
// the shape records them (a Qwen3 scenario from its config.json has them too).
TEST(KinetoHf, Qwen3WithQkNormPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"qwen3.prefill", "qwen3.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d5120 h40/8x128 ffn17408 v32000 gated depth 2+0x0+0 lora - norms 2+qk positions 0");
  test_support::report_held_out("qwen3", h);
  EXPECT_LE(h.median, k_bound);
}

// Gemma-2: eager attention (matmul, scaling, soft-capping, mask, softmax, matmul), four norms a
// layer, GELU-tanh, and layers that differ only by the sliding window's two slices.
TEST(KinetoHf, Gemma2PricesItsHeldOutSteps) {
  const HeldOut h = held_out({"gemma2.prefill", "gemma2.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  test_support::report_held_out("gemma2", h);
  EXPECT_LE(h.median, k_bound);
}

// Mixtral's experts by transformers 5's grouped GEMM: a router, top-2, and two _grouped_mm.
TEST(KinetoHf, MixtralGroupedExpertsPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"mixtral.prefill", "mixtral.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d1024 h32/8x128 ffn3584 v32000 gated depth 2+0x0+0 lora - moe 8x2");
  test_support::report_held_out("mixtral", h);
  EXPECT_LE(h.median, k_bound);
}

// Mixtral's experts one by one (transformers 4's loop): as many linears as experts hit.
TEST(KinetoHf, MixtralLoopedExpertsPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"mixtral-eager.prefill", "mixtral-eager.decode"}, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  test_support::report_held_out("mixtral-eager", h);
  EXPECT_LE(h.median, k_bound);
}

// A base model (LlamaModel, no LM head): its steps map, the profile has no head, and the held-out
// steps, which ran none, are priced without one.
TEST(KinetoHf, ABaseModelWithoutLmHeadPricesItsHeldOutSteps) {
  const HeldOut h = held_out({"llama3-base.mixed"}, false);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(h.shape));
  EXPECT_EQ(h.imported.profile.find("lm_head"), nullptr);
  EXPECT_EQ(h.imported.profile.find("sampling"), nullptr);
  test_support::report_held_out("llama3-base", h);
  EXPECT_LE(h.median, k_bound);
}

}  // namespace
}  // namespace exitsim::analysis
