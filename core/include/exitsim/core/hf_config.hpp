#pragma once

#include <string>
#include <string_view>

#include "exitsim/core/model_shape.hpp"

namespace exitsim {

// The model_type values read_hf_config understands, in the order messages list them.
inline constexpr std::string_view k_hf_model_types[] = {
    "llama",       "qwen2",       "qwen3",  "qwen3_moe",   "mistral",
    "mixtral",     "gemma",       "gemma2", "gemma3",      "gemma3_text",
    "deepseek_v2", "deepseek_v3", "llama4", "llama4_text", "gpt2"};

// A Hugging Face config.json as the simulator's model shape (docs/scenario.md, "Hugging Face
// configs", lists what each family's keys become):
// - every family but GPT-2: dimensions (hidden_size, num_attention_heads, num_key_value_heads,
//   head_dim, intermediate_size, vocab_size), layers (num_hidden_layers, a plain stack),
//   context window (max_position_embeddings), tied embeddings (tie_word_embeddings; absent:
//   false, but true for the Gemmas as transformers defaults) and dtype (torch_dtype, or
//   transformers 5's dtype: float32, bfloat16 or float16; absent: bf16). Absent
//   num_key_value_heads is num_attention_heads and absent head_dim hidden_size /
//   num_attention_heads, as in transformers (Gemma needs head_dim); Gemma 3 takes
//   Gemma3TextConfig's defaults for the keys its multimodal configs leave out. The MLP is gated
//   (SwiGLU; GeGLU for Gemma).
// - mixtral: experts (num_local_experts, num_experts_per_tok); qwen3_moe: num_experts of
//   moe_intermediate_size on every layer (decoder_sparse_step 1, no mlp_only_layers).
// - mistral, mixtral: sliding_window on every layer; qwen2, qwen3: use_sliding_window true is
//   refused (its layer split is not read).
// - gemma2, gemma3: four norms a layer, Gemma 3's QK-norm, sliding_window on the layers
//   layer_types names, else every other layer (Gemma 2) or 5 of every sliding_window_pattern (6).
// - deepseek_v2, deepseek_v3: latent attention (kv_lora_rank, q_lora_rank, qk_nope_head_dim,
//   qk_rope_head_dim, v_head_dim), n_routed_experts and n_shared_experts of
//   moe_intermediate_size, dense layers of intermediate_size (first_k_dense_replace,
//   moe_layer_freq).
// - llama4 (its text_config), llama4_text: num_local_experts and a shared expert of
//   intermediate_size on moe_layers (or every interleave_moe_layer_step-th layer), dense layers
//   of intermediate_size_mlp, attention_chunk_size on the layers with rotary positions
//   (layer_types, no_rope_layers or no_rope_layer_interval).
// - gpt2: n_embd, n_head, n_layer, n_inner (null: 4 n_embd), vocab_size, n_positions (context
//   and learned positions), a plain MLP, biases and LayerNorms, tied embeddings.
//
// What the shape cannot say is not read, and the cost model does not price it: Qwen2's Q/K/V
// biases, logit soft-capping, RoPE scaling, DeepSeek-V3's multi-token-prediction layer
// (num_nextn_predict_layers: not loaded for serving without speculative decoding). A quantized
// checkpoint (quantization_config) is refused: its weight bytes are not torch_dtype's.
//
// Every problem is one InputError naming `file` and the key ("model_type: expected one of llama,
// ..., found \"bert\""), including malformed JSON, duplicate keys and shapes find_shape_problem
// refuses (named by their config.json key, under text_config. where the model is there). The
// name is _name_or_path when given, else the file's folder name.
ModelShape parse_hf_config(std::string_view text, const std::string& file);

// config.json's key for an exitsim field that find_shape_problem or the engine's model checks
// report (d_model -> hidden_size, max_positions -> max_position_embeddings), in a config of
// `model_type` (GPT-2, DeepSeek, Llama 4, ... name some differently); the field itself when the
// config has no key of its own for it. The one table of the two config.json readers (core's and
// the engine's).
std::string hf_key(const std::string& field, const std::string& model_type);

// The file at `path` (at most 16 MiB), parsed as above; a missing or unreadable file is an
// InputError naming the path.
ModelShape read_hf_config(const std::string& path);

}  // namespace exitsim
