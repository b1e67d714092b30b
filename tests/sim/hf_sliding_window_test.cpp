// Gemma 2 and Gemma 3 read from their Hugging Face configs (model.hf_config): sliding-window
// layers price attention over the keys in their window, min(context, window), while the K/V
// cache holds every layer's whole context. Every figure is worked out here from the config's
// numbers (the roofline's conventions for norms, activations and sampling as in
// hf_latent_attention_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/hf_config.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/kv_capacity.hpp"

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

// google/gemma-2-9b's config.json, the keys the shape reads.
constexpr const char* k_gemma2 = R"({
  "architectures": ["Gemma2ForCausalLM"],
  "attn_logit_softcapping": 50.0,
  "final_logit_softcapping": 30.0,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 3584,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "gemma2",
  "num_attention_heads": 16,
  "num_hidden_layers": 42,
  "num_key_value_heads": 8,
  "query_pre_attn_scalar": 256,
  "sliding_window": 4096,
  "torch_dtype": "float32",
  "vocab_size": 256000
})";
constexpr std::int64_t d = 3584, heads = 16, kv_heads = 8, hd = 256, ffn = 14336;
constexpr std::int64_t layers = 42, vocab = 256000, window = 4096;

ModelShape gemma2() {
  return parse_hf_config(k_gemma2, "gemma-2-9b/config.json");
}

// Per layer Q, K, V and O of 16 and 8 heads of 256 on 3584, the GeGLU MLP, four norms (before
// and after attention and the MLP); tied embeddings and the final norm: 9,241,705,984, the count
// of google/gemma-2-9b's card (9.24B) and of transformers' Gemma2ForCausalLM. fp32 as the
// config says: 4 bytes each.
TEST(HfSlidingWindow, Gemma2WeightsCountItsFourNormsALayer) {
  const ModelShape m = gemma2();
  const std::int64_t layer =
      d * heads * hd + 2 * d * kv_heads * hd + heads * hd * d + 3 * d * ffn + 4 * d;
  const std::int64_t total = layers * layer + vocab * d + d;
  EXPECT_EQ(total, 9'241'705'984);
  EXPECT_EQ(m.parameter_count(), total);
  EXPECT_EQ(m.weight_bytes(), 4 * total);
  EXPECT_EQ(m.kv_bytes_per_token_per_layer(), 2 * kv_heads * hd * 4);
}

// Gemma 2 alternates: layers 0, 2, ..., 40 slide over 4096 tokens, the others see everything.
TEST(HfSlidingWindow, Gemma2SlidesEveryOtherLayerFromTheFirst) {
  const ModelShape m = gemma2();
  EXPECT_EQ(m.window.kind, WindowKind::sliding);
  EXPECT_EQ(m.window.tokens, window);
  ASSERT_EQ(m.windowed_layers.size(), static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l)
    EXPECT_EQ(m.windowed_layers[static_cast<std::size_t>(l)], l % 2 == 0) << l;
}

// One decode token at context 6000: the 21 global layers attend over 6001 keys, the 21 sliding
// ones over 4096; each key is 2 x 2 x 16 x 256 FLOPs (QK^T, PV). Past the window only the global
// layers' attention grows, by that much and one K/V token's bytes per key.
TEST(HfSlidingWindow, DecodeOnSlidingLayersIsPricedOverTheWindow) {
  const RooflineCostModel counter = RooflineCostModel::counting(gemma2());
  const auto decode = [&](std::int64_t c) {
    return counter.iteration_cost(std::vector<BatchEntry>{{1, c, layers, true}});
  };
  const double per_key = 4.0 * heads * hd;
  const double linear = 2.0 * d * (heads * hd + 2 * kv_heads * hd) + 2.0 * heads * hd * d +
                        2.0 * d * 2 * ffn + 5.0 * ffn + 2.0 * ffn * d;
  const double two_norms = 2 * 4.0 * d;  // the two fused norm ops (the other two: not priced)
  const double head = 4.0 * d + 2.0 * d * vocab + 5.0 * vocab;
  const std::int64_t c = 6000;
  const double expected =
      layers * (two_norms + linear) + 21 * (c + 1) * per_key + 21 * window * per_key + head;
  EXPECT_DOUBLE_EQ(decode(c).flops, expected);
  EXPECT_DOUBLE_EQ(decode(c + 1000).flops - decode(c).flops, 21 * 1000 * per_key);
  EXPECT_NEAR(decode(c + 1000).bytes - decode(c).bytes, 21 * 1000 * (2.0 * kv_heads * hd * 4),
              1e-3);
  // Inside the window every layer's attention grows.
  EXPECT_DOUBLE_EQ(decode(2000).flops - decode(1000).flops, layers * 1000 * per_key);
}

// A 6000-token prompt: a sliding layer's queries see min(position + 1, 4096) keys, 4096 x 4097 / 2
// for the first 4096 and 4096 each after; a global layer's 6000 x 6001 / 2.
TEST(HfSlidingWindow, PrefillPairsOnSlidingLayersStopAtTheWindow) {
  const RooflineCostModel counter = RooflineCostModel::counting(gemma2());
  const std::int64_t q = 6000;
  const std::vector<OpCost> ops =
      counter.op_breakdown(std::vector<BatchEntry>{{q, 0, layers, true}});
  const double per_pair = 4.0 * heads * hd;
  const double sliding_pairs =
      window * (window + 1) / 2.0 + static_cast<double>(q - window) * window;
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_prefill, 0), sliding_pairs * per_pair);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_prefill, 1), q * (q + 1) / 2.0 * per_pair);
}

// iteration_cost (which sums each group of layers once, as its sliding and global layers see it)
// prices what op_breakdown (layer by layer, entry by entry) does, for a batch that mixes prefill
// chunks and decodes inside and past the window, one of them exiting at layer 20.
TEST(HfSlidingWindow, IterationCostIsTheSumOfItsLayersOps) {
  const RooflineCostModel counter = RooflineCostModel::counting(gemma2());
  const std::vector<BatchEntry> batch = {{6000, 0, layers, true},
                                         {200, 3000, layers, true},
                                         {1, 5000, layers, true},
                                         {1, 100, layers, true},
                                         {1, 7000, 20, true}};
  double flops = 0;
  double bytes = 0;
  for (const OpCost& op : counter.op_breakdown(batch)) {
    flops += op.flops;
    bytes += op.bytes;
  }
  const IterationCost cost = counter.iteration_cost(batch);
  EXPECT_DOUBLE_EQ(cost.flops, flops);
  EXPECT_NEAR(cost.bytes, bytes, 1e-9 * bytes);
}

// The simulator's K/V blocks hold a sequence's whole context on every layer: the sliding layers'
// out-of-window blocks are not freed (docs/cost_model.md, "Attention windows"), so a token costs
// all 42 layers' K/V.
TEST(HfSlidingWindow, KvMemoryHoldsEveryLayersWholeContext) {
  const KvCapacity kv = derive_kv_capacity(gemma2(), *find_hardware_preset("h100-sxm"), {});
  EXPECT_EQ(kv.kv_bytes_per_token, layers * 2 * kv_heads * hd * 4);
}

// A measured table or profile has one price for a layer, which cannot tell a sliding layer from
// a global one: refused at cost_model.kind before any file is read.
TEST(HfSlidingWindow, MeasuredCostModelsAreRefusedForLayersThatDiffer) {
  scenario::CostModelConfig config;
  config.kind = "table";
  config.profile = "costs.csv";
  try {
    make_cost_model(config, gemma2(), *find_hardware_preset("h100-sxm"));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cost_model.kind: expected roofline for gemma-2-9b, whose layers differ (attention "
              "windows or dense layers among mixtures) where a measured table prices every layer "
              "alike, found table");
  }
}

// google/gemma-3-1b-it's config.json (model_type gemma3_text), the keys the shape reads.
constexpr const char* k_gemma3 = R"({
  "architectures": ["Gemma3ForCausalLM"],
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152,
  "intermediate_size": 6912,
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 26,
  "num_key_value_heads": 1,
  "query_pre_attn_scalar": 256,
  "sliding_window": 512,
  "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16",
  "vocab_size": 262144
})";

// Gemma 3 1B: four norms and the QK-norm (two 256-wide norms) a layer, tied embeddings:
// 999,885,952 (transformers' Gemma3ForCausalLM counts the same). Five layers of every six slide
// over 512 tokens: layers 5, 11, 17 and 23 are global.
TEST(HfSlidingWindow, Gemma3SlidesFiveLayersOfSixAndCountsItsQkNorm) {
  const ModelShape m = parse_hf_config(k_gemma3, "gemma-3-1b/config.json");
  const std::int64_t d3 = 1152, h3 = 4, kv3 = 1, f3 = 6912, l3 = 26, v3 = 262144;
  const std::int64_t layer =
      d3 * h3 * hd + 2 * d3 * kv3 * hd + h3 * hd * d3 + 3 * d3 * f3 + 4 * d3 + 2 * hd;
  EXPECT_EQ(l3 * layer + v3 * d3 + d3, 999'885'952);
  EXPECT_EQ(m.parameter_count(), 999'885'952);
  EXPECT_EQ(m.window.tokens, 512);
  std::vector<int> global;
  for (int l = 0; l < l3; ++l) {
    if (!m.layer_is_windowed(l))
      global.push_back(l);
  }
  EXPECT_EQ(global, (std::vector<int>{5, 11, 17, 23}));

  // At context 2000 a sliding layer's decode reads 512 keys, a global one 2001.
  const RooflineCostModel counter = RooflineCostModel::counting(m);
  const std::vector<OpCost> ops =
      counter.op_breakdown(std::vector<BatchEntry>{{1, 2000, 26, true}});
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_decode, 4), 512 * 4.0 * h3 * hd);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_decode, 5), 2001 * 4.0 * h3 * hd);
}

// layer_types, when the config lists it, says which layers slide (transformers builds it from the
// pattern otherwise): all global here, so no window at all.
TEST(HfSlidingWindow, LayerTypesOverrideThePattern) {
  std::string text = k_gemma3;
  std::string types = R"("layer_types": [)";
  for (int l = 0; l < 26; ++l)
    types += std::string(l > 0 ? ", " : "") + "\"full_attention\"";
  text.insert(text.find(R"("max_position_embeddings")"), types + "],\n  ");
  const ModelShape m = parse_hf_config(text, "gemma-3-1b/config.json");
  EXPECT_TRUE(m.window.none());
  EXPECT_TRUE(m.windowed_layers.empty());
}

}  // namespace
}  // namespace exitsim::sim
