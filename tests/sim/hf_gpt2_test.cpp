// GPT-2 read from its Hugging Face config (model.hf_config): learned positions, LayerNorms,
// biases on every linear, a plain GELU MLP and a tied LM head, under GPT-2's own key names.
// Every figure is worked out here from the config's numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exitsim/core/hf_config.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {
namespace {

// openai-community/gpt2's config.json, the keys the shape reads (no torch_dtype: bf16, as
// served).
constexpr const char* k_gpt2 = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_inner": null,
  "n_layer": 12,
  "n_positions": 1024,
  "vocab_size": 50257
})";
constexpr std::int64_t d = 768, heads = 12, layers = 12, positions = 1024, vocab = 50257;
constexpr std::int64_t ffn = 4 * d;  // n_inner null

// Per layer c_attn (d x 3d and its bias), c_proj (d x d, bias), c_fc (d x 4d, bias), the MLP's
// c_proj (4d x d, bias) and two LayerNorms of a weight and a bias each; the token embedding (the
// LM head tied to it), the 1024 learned positions and the final LayerNorm: 124,439,808, the
// count of the GPT-2 small card (124M) and of transformers' GPT2LMHeadModel.
TEST(HfGpt2, WeightsCountBiasesLayerNormsAndLearnedPositions) {
  const ModelShape m = parse_hf_config(k_gpt2, "gpt2/config.json");
  const std::int64_t layer =
      (d * 3 * d + 3 * d) + (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 2 * (2 * d);
  const std::int64_t total = layers * layer + vocab * d + positions * d + 2 * d;
  EXPECT_EQ(total, 124'439'808);
  EXPECT_EQ(m.parameter_count(), total);
  EXPECT_EQ(m.max_context, positions);
  EXPECT_EQ(m.mlp, MlpKind::plain);
  EXPECT_TRUE(m.tied_embeddings);
  // K and V of 12 heads of 64 at bf16.
  EXPECT_EQ(m.kv_bytes_per_token_per_layer(), 2 * heads * (d / heads) * 2);
}

// One decode token at context 500: per layer two norms, QKV with its bias adds, attention over
// 501 keys (2 x 2 x 768 FLOPs each), the output projection, the plain MLP (up, GELU's nominal 8
// FLOPs a unit, down) with their biases; then the final norm, the tied LM head and sampling.
TEST(HfGpt2, DecodeFlopsPerToken) {
  const RooflineCostModel counter =
      RooflineCostModel::counting(parse_hf_config(k_gpt2, "gpt2/config.json"));
  const std::int64_t c = 500;
  const double layer = 2 * 4.0 * d + (2.0 * d * 3 * d + 3 * d) + (c + 1) * 4.0 * d +
                       (2.0 * d * d + d) + (2.0 * d * ffn + ffn) + 8.0 * ffn + (2.0 * ffn * d + d);
  const double head = 4.0 * d + 2.0 * d * vocab + 5.0 * vocab;
  EXPECT_DOUBLE_EQ(counter.iteration_cost(std::vector<BatchEntry>{{1, c, layers, true}}).flops,
                   layers * layer + head);
}

}  // namespace
}  // namespace exitsim::sim
