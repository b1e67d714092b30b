#pragma once

#include <string>
#include <string_view>

#include "exitsim/core/model_shape.hpp"

namespace exitsim {

// The model_type values read_hf_config understands, in the order messages list them.
inline constexpr std::string_view k_hf_model_types[] = {"llama",   "qwen2",   "qwen3", "qwen3_moe",
                                                        "mistral", "mixtral", "gemma", "gemma2"};

// A Hugging Face config.json as the simulator's model shape: dimensions (hidden_size,
// num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size), layers
// (num_hidden_layers, a plain stack), context window (max_position_embeddings), tied embeddings
// (tie_word_embeddings; absent: false, but true for gemma and gemma2 as transformers defaults),
// dtype (torch_dtype, or transformers 5's dtype: float32, bfloat16 or float16; absent: bf16) and,
// for mixtral, the experts (num_local_experts, num_experts_per_tok); for qwen3_moe, the experts
// (num_experts, num_experts_per_tok) and each one's MLP width (moe_intermediate_size), with every
// layer a mixture (decoder_sparse_step 1, no mlp_only_layers: anything else is refused naming the
// key). The MLP is gated for every
// family (SwiGLU; GeGLU for Gemma). Absent num_key_value_heads is num_attention_heads and absent
// head_dim is hidden_size / num_attention_heads, as in transformers (Gemma needs head_dim); every
// other key above is required.
//
// What the shape cannot say is not read, and the cost model does not price it: Qwen2's Q/K/V
// biases, Qwen3's QK-norm (two head_dim-wide RMSNorms a layer: 10k weights in Qwen3-14B's 14.8B),
// Gemma 2's two extra norms per layer, logit soft-capping, RoPE scaling, and sliding windows
// (Mistral 7B v0.1's 4096, Gemma 2's alternate layers): attention is priced over the whole context.
// A quantized checkpoint (quantization_config) is refused: its weight bytes are not torch_dtype's.
//
// Every problem is one InputError naming `file` and the key ("model_type: expected one of llama,
// qwen2, mistral, mixtral, gemma, gemma2, found \"gpt2\""), including malformed JSON, duplicate
// keys and shapes find_shape_problem refuses (named by their config.json key). The name is
// _name_or_path when given, else the file's folder name.
ModelShape parse_hf_config(std::string_view text, const std::string& file);

// The file at `path` (at most 16 MiB), parsed as above; a missing or unreadable file is an
// InputError naming the path.
ModelShape read_hf_config(const std::string& path);

}  // namespace exitsim
