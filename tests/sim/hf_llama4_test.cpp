// Llama 4 read from its Hugging Face config (model.hf_config, the language model in its
// text_config): mixtures with a shared expert, interleaved with dense layers, and chunked
// attention on the layers with rotary positions. The config is Llama-4-Scout's
// (../shared/models/hf/llama-4-scout-17b-16e-instruct-fp8-dynamic) without its
// quantization_config: that FP8 checkpoint's weights are not bf16 and a quantized config is
// refused, but its text_config is the bf16 model's. Every figure is worked out here from the
// config's numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/core/hf_config.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/hf_models.hpp"

namespace exitsim::sim {
namespace {

double flops_of(const std::vector<OpCost>& ops, OpKind kind, int layer) {
  for (const OpCost& op : ops) {
    if (op.kind == kind && op.layer == layer)
      return op.flops;
  }
  ADD_FAILURE() << "no op " << to_string(kind) << " at layer " << layer;
  return 0;
}

constexpr std::int64_t d = 5120, heads = 40, kv_heads = 8, hd = 128, expert_ffn = 8192;
constexpr std::int64_t dense_ffn = 16384, experts = 16, layers = 48, vocab = 202048;
constexpr std::int64_t chunk = 8192;

// The config without quantization_config, with `edit` applied to its text_config.
ModelShape scout(const std::string& path, const nlohmann::json& edit = nlohmann::json::object()) {
  nlohmann::json config = nlohmann::json::parse(test_support::read_text(path));
  config.erase("quantization_config");
  config["text_config"].update(edit);
  return parse_hf_config(config.dump(), path);
}

// Per layer Q and O of 40 heads of 128 on 5120, K and V of 8, 16 routed experts and the shared
// one of 3 x 5120 x 8192 with the 5120 x 16 router, two norms; untied embeddings and the final
// norm: 107,769,861,120 (transformers' Llama4ForCausalLM on this text_config counts the same;
// the card's 109B adds the vision encoder). One routed expert a token: 17,172,894,720 active
// (the card's 17B).
TEST(HfLlama4, ScoutWeightsAreItsMixturesWithTheSharedExpert) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "llama-4-scout-17b-16e-instruct-fp8-dynamic");
  const ModelShape m = scout(path);
  const std::int64_t attention = 2 * d * heads * hd + 2 * d * kv_heads * hd;
  const std::int64_t expert = 3 * d * expert_ffn;
  const std::int64_t layer = attention + (experts + 1) * expert + d * experts + 2 * d;
  const std::int64_t total = layers * layer + 2 * vocab * d + d;
  EXPECT_EQ(total, 107'769'861'120);
  EXPECT_EQ(m.parameter_count(), total);
  EXPECT_EQ(m.active_parameters_per_token(), total - layers * (experts - 1) * expert);
  EXPECT_EQ(m.active_parameters_per_token(), 17'172'894'720);
  EXPECT_EQ(m.kv_bytes_per_token_per_layer(), 2 * kv_heads * hd * 2);
  EXPECT_TRUE(m.dense_layers.empty());  // interleave_moe_layer_step 1: every layer a mixture
}

// no_rope_layers [] is transformers' default: a NoPE layer of global attention every 4th layer
// (3, 7, ..., 47), the other 36 attend within chunks of 8192 tokens.
TEST(HfLlama4, ChunkedLayersAreThoseWithRotaryPositions) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "llama-4-scout-17b-16e-instruct-fp8-dynamic");
  const ModelShape m = scout(path);
  EXPECT_EQ(m.window.kind, WindowKind::chunked);
  EXPECT_EQ(m.window.tokens, chunk);
  for (int l = 0; l < layers; ++l)
    EXPECT_EQ(m.layer_is_windowed(l), (l + 1) % 4 != 0) << l;
}

// A decode token at context 10000 is in the second chunk: a chunked layer attends over
// 10000 - 8192 + 1 = 1809 keys, a global one over 10001, each key 4 x 40 x 128 FLOPs. The whole
// token: per layer two norms, QKV, attention, O, the router and two experts (its routed one and
// the shared one), then the head.
TEST(HfLlama4, DecodeOnChunkedLayersIsPricedOverTheQuerysChunk) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "llama-4-scout-17b-16e-instruct-fp8-dynamic");
  const RooflineCostModel counter = RooflineCostModel::counting(scout(path));
  const std::int64_t c = 10000;
  const std::vector<BatchEntry> batch = {{1, c, layers, true}};
  const std::vector<OpCost> ops = counter.op_breakdown(batch);
  const double per_key = 4.0 * heads * hd;
  const double chunked_keys = static_cast<double>(c - chunk + 1);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_decode, 0), chunked_keys * per_key);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_decode, 3), (c + 1) * per_key);

  const double linear = 2.0 * d * (heads * hd + 2 * kv_heads * hd) + 2.0 * heads * hd * d;
  const double mixture =
      2.0 * d * experts + 2 * (2.0 * d * 2 * expert_ffn + 5.0 * expert_ffn + 2.0 * expert_ffn * d);
  const double two_norms = 2 * 4.0 * d;
  const double head = 4.0 * d + 2.0 * d * vocab + 5.0 * vocab;
  const double expected = layers * (two_norms + linear + mixture) + 36 * chunked_keys * per_key +
                          12 * (c + 1) * per_key + head;
  EXPECT_DOUBLE_EQ(counter.iteration_cost(batch).flops, expected);
}

// A prompt across a chunk boundary: 1000 tokens at positions 7692 to 8691. On a chunked layer
// those up to 8191 see 7693 to 8192 keys, those from 8192 on 1 to 500 (a new chunk); on a global
// layer 1000 x 7692 + 1000 x 1001 / 2 pairs.
TEST(HfLlama4, PrefillAcrossAChunkBoundaryStartsTheNextChunkAfresh) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "llama-4-scout-17b-16e-instruct-fp8-dynamic");
  const RooflineCostModel counter = RooflineCostModel::counting(scout(path));
  const std::vector<OpCost> ops =
      counter.op_breakdown(std::vector<BatchEntry>{{1000, 7692, layers, true}});
  const double per_pair = 4.0 * heads * hd;
  const double chunked_pairs = (7693.0 + 8192.0) * 500 / 2 + 500.0 * 501 / 2;
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_prefill, 0), chunked_pairs * per_pair);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_prefill, 3),
                   (1000.0 * 7692 + 1000.0 * 1001 / 2) * per_pair);
}

// Maverick's interleaving on Scout's layers: interleave_moe_layer_step 2 makes layers 1, 3, ...
// mixtures of 128 experts and the others dense MLPs of intermediate_size_mlp (16384), with no
// router: 400,711,848,960 weights (transformers counts the same for this text_config).
TEST(HfLlama4, InterleavedMixturesLeaveDenseLayersBetween) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "llama-4-scout-17b-16e-instruct-fp8-dynamic");
  const ModelShape m = scout(path, {{"interleave_moe_layer_step", 2}, {"num_local_experts", 128}});
  const std::int64_t attention = 2 * d * heads * hd + 2 * d * kv_heads * hd;
  const std::int64_t dense = attention + 3 * d * dense_ffn + 2 * d;
  const std::int64_t mixture = attention + 129 * 3 * d * expert_ffn + d * 128 + 2 * d;
  const std::int64_t total = 24 * dense + 24 * mixture + 2 * vocab * d + d;
  EXPECT_EQ(total, 400'711'848'960);
  EXPECT_EQ(m.parameter_count(), total);
  for (int l = 0; l < layers; ++l)
    EXPECT_EQ(m.layer_is_moe(l), l % 2 == 1) << l;

  const RooflineCostModel counter = RooflineCostModel::counting(m);
  const std::vector<OpCost> ops =
      counter.op_breakdown(std::vector<BatchEntry>{{1, 100, layers, true}});
  EXPECT_EQ(flops_of(ops, OpKind::moe_router, 0), 0);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::mlp_gate_up, 0), 2.0 * d * 2 * dense_ffn);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::moe_router, 1), 2.0 * d * 128);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::mlp_gate_up, 1), 2 * (2.0 * d * 2 * expert_ffn));
}

}  // namespace
}  // namespace exitsim::sim
