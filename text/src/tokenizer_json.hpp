#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "bpe_model.hpp"

namespace exitsim::text {

// Reads tokenizer.json text into a BpeModel; every failure an InputError naming `file` and the
// key path. The JSON is read with exitsim's limits (core/json_input.hpp) and at most
// k_max_tokenizer_bytes.
std::unique_ptr<const BpeModel> parse_tokenizer_json(std::string_view text,
                                                     const std::string& file);
// The same from the file `path`, streamed into the parser.
std::unique_ptr<const BpeModel> read_tokenizer_json(const std::string& path);

// Llama 3's tokenizer.json is 9 MB; a file far larger is a mistake, not a tokenizer.
inline constexpr std::uint64_t k_max_tokenizer_bytes = std::uint64_t{1} << 30;

class Reader;

// The pipeline around the model, each from its top-level key of `root` (absent or null: none).
// Added tokens must be read first: templates name them.
void read_normalizer(const Reader& reader, const nlohmann::json& root, BpeModel& model);
void read_pre_tokenizer(const Reader& reader, const nlohmann::json& root, BpeModel& model);
void read_post_processor(const Reader& reader, const nlohmann::json& root, BpeModel& model);

// The GPT-2 split pattern ByteLevel's use_regex applies.
inline constexpr std::string_view k_gpt2_split_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace exitsim::text
