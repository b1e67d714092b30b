#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace exitsim::traces {

// Parses a whole JSON file's text (a UTF-8 BOM before it is skipped, as RFC 8259 allows), every
// failure an InputError naming `path`: "expected <what>, found ..." for malformed JSON and for a
// NUL byte (nlohmann would stop at a NUL as at the end of the text and ignore what follows), and
// "expected JSON numbers within the range of a double" for 1e400 (nlohmann's out_of_range).
nlohmann::json parse_json_document(std::string_view text, const std::string& path,
                                   const std::string& what);

// How a JSON value appears after "found" in a message: its JSON text (a string quoted and
// escaped, so it stays on one line), cut after 60 bytes at a character boundary, with "...".
std::string json_shown(const nlohmann::json& value);

}  // namespace exitsim::traces
