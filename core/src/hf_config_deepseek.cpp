// DeepSeek-V2 and V3 configs (model_type deepseek_v2, deepseek_v3): multi-head latent attention
// and a mixture of routed and shared experts after a few dense layers.
#include "hf_config_keys.hpp"

namespace exitsim::hf {
namespace {

// Latent attention: queries and keys of qk_nope_head_dim + qk_rope_head_dim per head (the
// shape's head_dim; the config's own head_dim, which transformers sets to the rotary part, is
// not it), values of v_head_dim, K/V through a kv_lora_rank latent, queries through a
// q_lora_rank bottleneck when the config gives one (null in DeepSeek-V2-Lite).
void read_latent_attention(const Keys& keys, ModelShape& shape) {
  LatentAttention& a = shape.latent;
  a.kv_lora_rank = keys.integer("kv_lora_rank", 1, k_max_intermediate);
  a.q_lora_rank = keys.integer("q_lora_rank", 1, k_max_intermediate, 0);
  a.rope_head_dim = keys.integer("qk_rope_head_dim", 1, k_max_head_dim);
  const std::int64_t nope = keys.integer("qk_nope_head_dim", 1, k_max_head_dim - a.rope_head_dim);
  a.v_head_dim = keys.integer("v_head_dim", 1, k_max_head_dim);
  shape.head_dim = nope + a.rope_head_dim;
  // Every head has its own keys and values from the latent: num_key_value_heads does not apply.
  shape.n_kv_heads = shape.n_heads;
}

}  // namespace

void read_deepseek(const Keys& keys, ModelShape& shape) {
  read_latent_attention(keys, shape);
  // The mixture: n_routed_experts of moe_intermediate_size, num_experts_per_tok a token, and
  // n_shared_experts of the same width that every token runs. intermediate_size is the dense
  // layers' width: the first first_k_dense_replace layers, and those off moe_layer_freq
  // (transformers' and vLLM's: layer i is a mixture when i >= first_k_dense_replace and
  // i % moe_layer_freq == 0).
  shape.dense_ffn_dim = shape.ffn_dim;
  shape.experts = keys.integer("n_routed_experts", 1, k_max_experts);
  shape.experts_per_token = keys.integer("num_experts_per_tok", 1, shape.experts);
  shape.shared_experts = keys.integer("n_shared_experts", 0, k_max_experts, 0);
  shape.ffn_dim = keys.integer("moe_intermediate_size", 1, k_max_intermediate);
  const int layers = shape.depth.prelude_layers;
  const std::int64_t first_mixture = keys.integer("first_k_dense_replace", 0, layers, 0);
  const std::int64_t every = keys.integer("moe_layer_freq", 1, k_max_layers, 1);
  std::vector<bool> dense;
  for (int l = 0; l < layers; ++l)
    dense.push_back(l < first_mixture || l % every != 0);
  if (std::find(dense.begin(), dense.end(), true) != dense.end())
    shape.dense_layers = std::move(dense);
}

}  // namespace exitsim::hf
