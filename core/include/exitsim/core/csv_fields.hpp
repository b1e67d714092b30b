#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim {

// One comma-separated field of a line, with surrounding spaces and tabs trimmed.
struct CsvField {
  std::string_view text;
  std::int64_t column = 0;  // 1-based position of the trimmed text in the line
};

// Splits `line` on commas into `out` (cleared first). Quoting is not supported: the plain
// formats that use this (request traces, exit tables, cost tables) never quote their fields.
void split_csv_fields(std::string_view line, std::vector<CsvField>& out);

// The text without a leading UTF-8 byte-order mark (an editor's), which every exitsim CSV
// accepts on its first line: refused, the message showed two lines that looked the same.
std::string_view without_utf8_bom(std::string_view first_line);

// How a field's text appears in an "expected X, found Y" message: quoted and cut to 60 bytes
// (with "..." when cut), or "an empty field".
std::string quote_field(std::string_view text);

}  // namespace exitsim
