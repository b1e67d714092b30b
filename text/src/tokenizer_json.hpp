#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "bpe_model.hpp"

namespace exitsim::text {

// Reads tokenizer.json text into a BpeModel; every failure an InputError naming `file` and the
// key path.
std::unique_ptr<const BpeModel> parse_tokenizer_json(std::string_view text,
                                                     const std::string& file);

// The GPT-2 split pattern ByteLevel's use_regex applies.
inline constexpr std::string_view k_gpt2_split_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace exitsim::text
