// Gemma 2 and 3's layers (model_type gemma2, gemma3, gemma3_text) and Mistral's sliding window:
// local layers whose attention sees the last sliding_window tokens.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "hf_config_keys.hpp"

namespace exitsim::hf {
namespace {

// Which layers slide: layer_types when the config lists them, else every layer but each
// `period`-th (layer i slides when (i + 1) % period != 0, as transformers builds layer_types).
std::vector<bool> sliding_layers(const Keys& keys, int layers, std::int64_t period) {
  if (auto listed =
          windowed_layer_types(keys, static_cast<std::size_t>(layers), "sliding_attention"))
    return *listed;
  std::vector<bool> sliding;
  for (int l = 0; l < layers; ++l)
    sliding.push_back((l + 1) % period != 0);
  return sliding;
}

}  // namespace

std::optional<std::int64_t> gemma3_default(std::string_view key) {
  // transformers' Gemma3TextConfig.
  static const std::array<std::pair<std::string_view, std::int64_t>, 8> defaults = {{
      {"vocab_size", 262208},
      {"hidden_size", 2304},
      {"intermediate_size", 9216},
      {"num_hidden_layers", 26},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"max_position_embeddings", 131072},
  }};
  for (const auto& [name, value] : defaults) {
    if (name == key)
      return value;
  }
  return std::nullopt;
}

void read_gemma_layers(const Keys& keys, const std::string& type, ModelShape& shape) {
  // Norms before and after attention and before and after the MLP.
  shape.norms_per_layer = 4;
  const bool gemma3 = type != "gemma2";
  // Gemma 3 norms its queries and keys (a head_dim-wide RMSNorm each).
  shape.qk_norm = gemma3;
  if (gemma3) {
    keys.require_absent_or("use_bidirectional_attention", false,
                           "causal attention; EmbeddingGemma's bidirectional window is not read");
  }
  const int layers = shape.depth.prelude_layers;
  shape.window.kind = WindowKind::sliding;
  shape.window.tokens = keys.integer("sliding_window", 1, k_max_context,
                                     gemma3 ? std::optional<std::int64_t>(4096) : std::nullopt);
  // Gemma 2 alternates (layer 0 slides); Gemma 3 slides 5 layers of every 6 unless its config
  // says otherwise.
  const std::int64_t period =
      gemma3 ? keys.integer("sliding_window_pattern", 1, k_max_layers, 6) : 2;
  shape.windowed_layers = sliding_layers(keys, layers, period);
  if (std::find(shape.windowed_layers.begin(), shape.windowed_layers.end(), true) ==
      shape.windowed_layers.end()) {
    shape.window = {};
    shape.windowed_layers.clear();
  }
}

void read_mistral_window(const Keys& keys, ModelShape& shape) {
  if (keys.find("sliding_window") == nullptr)
    return;
  // Mistral 7B v0.1's 4096: every layer attends over the last sliding_window tokens.
  shape.window = {WindowKind::sliding, keys.integer("sliding_window", 1, k_max_context)};
  shape.windowed_layers.assign(static_cast<std::size_t>(shape.depth.prelude_layers), true);
}

}  // namespace exitsim::hf
