// `calibrate --kineto` on LitGPT (Lightning AI's `litgpt`), a third framework with its own model
// code: one fused QKV linear split three ways (split_with_sizes), its own RoPE from a cos/sin cache
// indexed by position, a preallocated KV cache written with index_copy_, K/V repeated to the query
// heads (repeat_interleave) before SDPA with an explicit mask, and logits for every position with
// one argmax per sequence. Profiled by training/litgpt_kineto_traces.py on this machine class
// (tests/analysis/data/kineto/litgpt, README there). Each model's prefill and decode traces
// calibrate one profile with every third step held out; the profile then prices those steps
// against their measured wall time.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "exitsim/sim/cost/cost_profile.hpp"
#include "support/kineto_traces.hpp"

namespace exitsim::analysis {
namespace {

const std::string k_litgpt =
    std::string(EXITSIM_SOURCE_DIR) + "/tests/analysis/data/kineto/litgpt/";

// A gated-MLP decoder of `layers` layers as litgpt's Config names it: n_embd, n_head,
// n_query_groups (K/V heads), head_size, intermediate_size, padded_vocab_size.
ModelShape litgpt_shape(const std::string& name, std::int64_t d, int heads, int kv_heads,
                        std::int64_t head_dim, std::int64_t ffn, std::int64_t vocab, int layers) {
  ModelShape shape;
  shape.name = name;
  shape.d_model = d;
  shape.n_heads = heads;
  shape.n_kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.ffn_dim = ffn;
  shape.vocab = vocab;
  shape.mlp = MlpKind::gated;  // LLaMAMLP: fc_1 (gate), fc_2 (up), silu, proj (down)
  shape.depth = DepthStructure::plain(layers);
  return shape;
}

// The config the generator recorded beside a trace agrees with the one worked out by hand.
void expect_recorded(const std::string& phase, const ModelShape& shape) {
  std::ifstream in(k_litgpt + phase + ".steps.json");
  const nlohmann::json c = nlohmann::json::parse(in)["config"];
  EXPECT_EQ(c["n_embd"], shape.d_model) << phase;
  EXPECT_EQ(c["n_head"], shape.n_heads) << phase;
  EXPECT_EQ(c["n_query_groups"], shape.n_kv_heads) << phase;
  EXPECT_EQ(c["head_size"], shape.head_dim) << phase;
  EXPECT_EQ(c["intermediate_size"], shape.ffn_dim) << phase;
  EXPECT_EQ(c["padded_vocab_size"], shape.vocab) << phase;
  EXPECT_EQ(c["n_layer"], shape.depth.stacked_depth()) << phase;
  EXPECT_EQ(c["mlp_class_name"], "LLaMAMLP") << phase;
}

// The import says that its prefill steps ran the LM head on every position. Worked out by hand:
// 8 prefill steps less the held-out #3 and #6 leave 6, and 12 decode steps less 4 leave 8: 14
// steps mapped, of which the 6 prefill ones have more head rows (batch x prompt) than sequences;
// a decode step's head has one row per sequence.
void expect_every_position_head_named(const test_support::HeldOutPricing& h) {
  bool named = false;
  for (const std::string& note : h.imported.profile.notes)
    named = named || note.starts_with("head       6 of 14 steps ran the LM head on every position");
  EXPECT_TRUE(named);
}

// The bound. Measured on the committed traces (each test prints them): Llama-3.2 median 16.1%
// (held-out prefill 2x32 and 2x96: 6% and 15%; decode 4x128, 3x200, 6x96, 8x512: 17, 20, 10 and
// 35%), Qwen2.5 median 5.9% (10, 9; 1, 6, 4, 6%). The Llama-3.2 decode trace was recorded while
// other jobs held the shared 2-core machine: its last steps took up to twice their unprofiled
// wall time (8x512: 111 ms under the profiler, 52 ms without, 73 ms of CPU; the steps.json), the
// 35%. Without the head's other rows added, the prefill errors are 20 and 42% (Llama-3.2), 11
// and 18% (Qwen2.5): the effect the import's note names. 20% is the HF traces' bound
// (kineto_hf_test.cpp: the same machine's spread), under the 25% at which calibrate distrusts a
// fit. The traces are committed: the figures are fixed until they are regenerated.
constexpr double k_bound = 0.20;

// Llama-3.2-1B (litgpt's "Llama-3.2-1B"): d 2048, 32 heads of 64 in 8 K/V groups (the fused QKV
// output is (32 + 2 x 8) x 64 = 3072 wide), ffn 8192; 16 layers cut to 2, vocab 128256 to 32000.
TEST(KinetoLitgpt, Llama32PricesItsHeldOutStepsAndReadsItsShape) {
  const ModelShape shape = litgpt_shape("llama3.2", 2048, 32, 8, 64, 8192, 32000, 2);
  expect_recorded("llama3.2.prefill", shape);
  const test_support::HeldOutPricing h = test_support::price_held_out_steps(
      k_litgpt, {"llama3.2.prefill", "llama3.2.decode"}, shape, true, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d2048 h32/8x64 ffn8192 v32000 gated depth 2+0x0+0 lora -");
  expect_every_position_head_named(h);
  test_support::report_held_out("litgpt llama3.2", h);
  EXPECT_LE(h.median, k_bound);
}

// Qwen2.5-1.5B (litgpt's "Qwen2.5-1.5B"): d 1536, 12 heads of 128 in 2 K/V groups (QKV output
// (12 + 2 x 2) x 128 = 2048 wide, with a bias), ffn 8960; 28 layers cut to 2, vocab 151936 to
// 32000.
TEST(KinetoLitgpt, Qwen25PricesItsHeldOutStepsAndReadsItsShape) {
  const ModelShape shape = litgpt_shape("qwen2.5", 1536, 12, 2, 128, 8960, 32000, 2);
  expect_recorded("qwen2.5.prefill", shape);
  const test_support::HeldOutPricing h = test_support::price_held_out_steps(
      k_litgpt, {"qwen2.5.prefill", "qwen2.5.decode"}, shape, true, true);
  EXPECT_EQ(h.imported.profile.source.model_shape, sim::model_fingerprint(shape));
  EXPECT_EQ(h.imported.profile.source.model_shape,
            "d1536 h12/2x128 ffn8960 v32000 gated depth 2+0x0+0 lora -");
  expect_every_position_head_named(h);
  test_support::report_held_out("litgpt qwen2.5", h);
  EXPECT_LE(h.median, k_bound);
}

}  // namespace
}  // namespace exitsim::analysis
