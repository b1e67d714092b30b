// GPT-2 configs (model_type gpt2): learned positions, LayerNorm, biases on every linear and a
// plain GELU MLP, under its own key names.
#include <fmt/format.h>

#include "hf_config_keys.hpp"

namespace exitsim::hf {

void read_gpt2(const Keys& keys, ModelShape& shape) {
  shape.d_model = keys.integer("n_embd", 1, k_max_hidden);
  shape.n_heads = keys.integer("n_head", 1, k_max_heads);
  if (shape.d_model % shape.n_heads != 0) {
    throw keys.error("n_head", fmt::format("a divisor of n_embd ({})", shape.d_model),
                     fmt::format("{}", shape.n_heads));
  }
  shape.n_kv_heads = shape.n_heads;
  shape.head_dim = shape.d_model / shape.n_heads;
  // n_inner null: 4 x n_embd (GPT2MLP's default).
  shape.ffn_dim = keys.integer("n_inner", 1, k_max_intermediate, 4 * shape.d_model);
  shape.vocab = keys.integer("vocab_size", 1, k_max_vocab);
  shape.depth = DepthStructure::plain(static_cast<int>(keys.integer("n_layer", 1, k_max_layers)));
  // The learned position embedding (wpe) has n_positions rows: the context window.
  shape.max_context = keys.integer("n_positions", 1, k_max_context);
  shape.learned_positions = shape.max_context;
  shape.tied_embeddings = keys.boolean("tie_word_embeddings", true);
  // c_fc, GELU, c_proj: two matrices (activation_function's choice of GELU does not change the
  // shape).
  shape.mlp = MlpKind::plain;
  shape.biases = true;
  keys.require_absent_or("add_cross_attention", false,
                         "a decoder-only model; cross-attention layers are not read");
}

}  // namespace exitsim::hf
