#pragma once

// The Hugging Face config.json reader's shared parts (private to core/src): typed access to a
// config's keys, and the readers of the families whose shapes go beyond a Llama-shaped layer
// (one file per family group: hf_config_deepseek.cpp, hf_config_gemma.cpp,
// hf_config_llama4.cpp, hf_config_gpt2.cpp).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/model_shape.hpp"

namespace exitsim::hf {

using nlohmann::json;

// The scenario keys' ranges (scenarios/src/schema_model.cpp), so that a model is refused the
// same way whether its shape comes from config.json or from model.* keys.
inline constexpr std::int64_t k_max_hidden = std::int64_t{1} << 20;        // model.d_model
inline constexpr std::int64_t k_max_heads = 4096;                          // model.n_heads
inline constexpr std::int64_t k_max_head_dim = 4096;                       // model.head_dim
inline constexpr std::int64_t k_max_intermediate = std::int64_t{1} << 22;  // model.ffn_dim
inline constexpr std::int64_t k_max_vocab = std::int64_t{1} << 24;         // model.vocab
inline constexpr std::int64_t k_max_layers = 100000;                       // model.depth.prelude
inline constexpr std::int64_t k_max_context = 1'000'000'000;               // model.max_context
inline constexpr std::int64_t k_max_experts = 65536;                       // model.experts

// A value as a message shows it: JSON text, cut to 80 characters.
std::string shown(const json& value);

// Typed access to one object's keys (the config, or its text_config); a null value counts as
// absent (transformers writes "head_dim": null and "sliding_window": null). Errors name the key
// by its path from the top ("text_config.hidden_size").
class Keys {
 public:
  Keys(const json& object, std::string file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const json* find(std::string_view key) const;
  InputError error(std::string_view key, const std::string& expected,
                   const std::string& found) const;
  // The key's integer in [lo, hi]; `fallback` when it is absent (else absence is an error).
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const;
  bool boolean(std::string_view key, bool fallback) const;
  // The key's list of `size` integers each in [lo, hi], or nullopt when it is absent.
  std::optional<std::vector<std::int64_t>> integers(std::string_view key, std::size_t size,
                                                    std::int64_t lo, std::int64_t hi) const;
  // The key's list of `size` strings each one of `allowed`, or nullopt when it is absent.
  std::optional<std::vector<std::string>> names(std::string_view key, std::size_t size,
                                                const std::vector<std::string>& allowed) const;
  // Refuses the key unless it is absent or equals `fine` ("expected <why>").
  void require_absent_or(std::string_view key, const json& fine, const std::string& why) const;
  // The object under `key` (Llama 4's and Gemma 3's text_config), required.
  Keys nested(std::string_view key) const;

  const std::string& file() const { return file_; }
  // The path of `key` as errors name it.
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }

 private:
  const json& object_;
  std::string file_;
  std::string prefix_;
};

// Per family: what its config adds to the common shape (dimensions, layers, context, dtype and
// tied embeddings already read), each refusing what it cannot model by its key.
void read_deepseek(const Keys& keys, ModelShape& shape);
// gemma2, gemma3, gemma3_text: four norms a layer, Gemma 3's QK-norm, sliding windows.
void read_gemma_layers(const Keys& keys, const std::string& type, ModelShape& shape);
// Mistral and Mixtral's sliding window, on every layer when the config sets one.
void read_mistral_window(const Keys& keys, ModelShape& shape);
void read_llama4(const Keys& keys, ModelShape& shape);
// GPT-2's keys are its own (n_embd, n_head, n_layer, n_positions, n_inner): the whole shape.
void read_gpt2(const Keys& keys, ModelShape& shape);

// Gemma 3's keys that its multimodal configs leave to Gemma3TextConfig's defaults (the 4B, 12B
// and 27B text_config gives neither vocab_size nor max_position_embeddings): transformers reads
// the same model with them.
std::optional<std::int64_t> gemma3_default(std::string_view key);

// Which layers a windowed attention applies to, from layer_types ("sliding_attention",
// "chunked_attention" against "full_attention"), one entry per layer; nullopt when absent.
std::optional<std::vector<bool>> windowed_layer_types(const Keys& keys, std::size_t layers,
                                                      const std::string& windowed);

}  // namespace exitsim::hf
