#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/engine/rope.hpp"

// What a model directory describes besides its tensors: dimensions, depth structure, numerics
// settings and where the weights are. Two layouts load (docs/engine_model_format.md):
//   - exitsim.json, our own, which can say everything (recursions, LoRA, routers);
//   - a Hugging Face Llama checkpoint (config.json + model.safetensors, or a sharded
//     model.safetensors.index.json), which loads as a plain model with exit points at chosen
//     layers.
namespace exitsim::engine {

// How text becomes token ids: "bytes" (one token per byte, ids 0-255, vocab >= 256), "bpe" (the
// byte-level BPE of the directory's Hugging Face tokenizer.json; a Llama directory that has one
// gets it) or "ids" (the inputs are token-id files; the model's own tokenizer is not run here).
enum class TokenizerKind : std::uint8_t { bytes, ids, bpe };

enum class ModelFormat : std::uint8_t { exitsim, hf_llama };

inline constexpr const char* k_model_format_v1 = "exitsim-model v1";
inline constexpr const char* k_exitsim_config_file = "exitsim.json";
inline constexpr const char* k_hf_config_file = "config.json";
inline constexpr const char* k_hf_tokenizer_file = "tokenizer.json";

struct ModelConfig {
  ModelShape shape;  // dtype fp32: the CPU engine computes in fp32 whatever the file holds
  float rms_eps = 1e-5f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = {};  // Llama 3.1's "llama3" frequency scaling, or none
  std::int64_t max_positions = 4096;
  bool routers = false;  // one linear router (d_model -> 1, with bias) per recursion
  TokenizerKind tokenizer = TokenizerKind::bytes;
  // Relative to `dir`: a .safetensors file, or a .safetensors.index.json naming the shards.
  std::string weights = "model.safetensors";
  std::filesystem::path dir;  // the model directory; empty for a model built in memory
  ModelFormat format = ModelFormat::exitsim;
  std::string config_file;  // the file this came from, for messages; empty when built in memory

  std::filesystem::path weights_path() const { return dir / weights; }
  std::filesystem::path tokenizer_path() const { return dir / k_hf_tokenizer_file; }

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Loads `dir`/exitsim.json, or else `dir`/config.json as a Hugging Face Llama. A non-empty
// `exit_layers_override` replaces the exit points (ascending, in [1, stacked depth]); for a
// Llama without it, the only exit point is the full depth. Throws InputError naming the file and
// key for anything missing, unknown, mistyped or inconsistent.
ModelConfig load_model_config(const std::filesystem::path& dir,
                              std::vector<int> exit_layers_override = {});

// Parses exitsim.json text; `file` names it in errors and `dir` becomes the config's dir.
ModelConfig parse_exitsim_config(std::string_view text, const std::string& file,
                                 const std::filesystem::path& dir);
// Parses a Hugging Face Llama config.json.
ModelConfig parse_hf_llama_config(std::string_view text, const std::string& file,
                                  const std::filesystem::path& dir);

// The exitsim.json text for `config` (every key written, so the file documents itself).
std::string model_config_json(const ModelConfig& config);

// Throws InputError (field prefixed "depth." etc., file = config.config_file) when the shape or
// the settings are not ones the engine can run.
void validate_model_config(const ModelConfig& config);

std::string_view to_string(TokenizerKind kind);

}  // namespace exitsim::engine
