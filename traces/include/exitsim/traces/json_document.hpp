#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "exitsim/core/json_input.hpp"

namespace exitsim::traces {

// The cap on a JSON document read whole by parse_json_document: far above any result, plan or
// profile exitsim reads this way, and below what would exhaust memory once parsed.
inline constexpr std::uint64_t k_max_json_document_bytes = std::uint64_t{1} << 30;

// Parses a whole JSON file's text with exitsim's JSON limits (core/json_input.hpp: 32 levels of
// nesting, each key once per object, no NUL, at most k_max_json_document_bytes), every failure
// an InputError naming `path`: "expected <what>, found invalid JSON at byte N" for malformed
// JSON, "expected JSON numbers within the range of a double" for 1e400.
nlohmann::json parse_json_document(std::string_view text, const std::string& path,
                                   const std::string& what);

using exitsim::json_shown;

}  // namespace exitsim::traces
