// Llama 4's language model (model_type llama4 with its text_config, or llama4_text): mixtures
// with a shared expert interleaved with dense layers, and chunked attention on the layers that
// use rotary positions.
#include <fmt/format.h>

#include <algorithm>

#include "hf_config_keys.hpp"

namespace exitsim::hf {
namespace {

// The mixture layers: moe_layers when listed, else every interleave_moe_layer_step-th layer
// from step - 1 (transformers' Llama4TextConfig). The others are dense MLPs of
// intermediate_size_mlp.
void read_mixtures(const Keys& keys, ModelShape& shape) {
  const int layers = shape.depth.prelude_layers;
  shape.experts = keys.integer("num_local_experts", 1, k_max_experts);
  shape.experts_per_token = keys.integer("num_experts_per_tok", 1, shape.experts);
  // Llama4TextMoe's shared_expert: one MLP of intermediate_size, like each routed expert.
  shape.shared_experts = 1;
  std::vector<bool> dense(static_cast<std::size_t>(layers), true);
  if (const json* listed = keys.find("moe_layers"); listed != nullptr) {
    const std::string expected = fmt::format("a list of layer indices in [0, {}]", layers - 1);
    if (!listed->is_array())
      throw keys.error("moe_layers", expected, shown(*listed));
    for (const json& layer : *listed) {
      if (!layer.is_number_integer() || layer.get<std::int64_t>() < 0 ||
          layer.get<std::int64_t>() >= layers)
        throw keys.error("moe_layers", expected, shown(layer));
      dense[static_cast<std::size_t>(layer.get<std::int64_t>())] = false;
    }
  } else {
    const std::int64_t step = keys.integer("interleave_moe_layer_step", 1, layers, 1);
    for (std::int64_t l = step - 1; l < layers; l += step)
      dense[static_cast<std::size_t>(l)] = false;
  }
  if (std::find(dense.begin(), dense.end(), true) != dense.end()) {
    shape.dense_ffn_dim = keys.integer("intermediate_size_mlp", 1, k_max_intermediate);
    shape.dense_layers = std::move(dense);
  }
}

// Chunked attention (attention_chunk_size; null: none) on the layers with rotary positions:
// layer_types when listed, else no_rope_layers (1: rotary and chunked, 0: NoPE and global; an
// empty list is transformers' default), else a NoPE layer every no_rope_layer_interval layers.
void read_chunks(const Keys& keys, ModelShape& shape) {
  if (keys.find("attention_chunk_size") == nullptr)
    return;
  const int layers = shape.depth.prelude_layers;
  const auto size = static_cast<std::size_t>(layers);
  std::vector<bool> chunked;
  if (auto listed = windowed_layer_types(keys, size, "chunked_attention")) {
    chunked = *listed;
  } else if (const json* rope = keys.find("no_rope_layers"); rope != nullptr && !rope->empty()) {
    const std::vector<std::int64_t> uses_rope = *keys.integers("no_rope_layers", size, 0, 1);
    for (const std::int64_t rotary : uses_rope)
      chunked.push_back(rotary == 1);
  } else {
    const std::int64_t interval = keys.integer("no_rope_layer_interval", 1, layers, 4);
    for (int l = 0; l < layers; ++l)
      chunked.push_back((l + 1) % interval != 0);
  }
  if (std::find(chunked.begin(), chunked.end(), true) == chunked.end())
    return;
  shape.window = {WindowKind::chunked, keys.integer("attention_chunk_size", 1, k_max_context)};
  shape.windowed_layers = std::move(chunked);
}

}  // namespace

void read_llama4(const Keys& keys, ModelShape& shape) {
  read_mixtures(keys, shape);
  read_chunks(keys, shape);
  // use_qk_norm is a norm without weights (Llama4TextL2Norm): nothing to count.
}

}  // namespace exitsim::hf
