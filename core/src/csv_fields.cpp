#include "exitsim/core/csv_fields.hpp"

namespace exitsim {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

}  // namespace

void split_csv_fields(std::string_view line, std::vector<CsvField>& out) {
  out.clear();
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    const std::size_t stop = comma == std::string_view::npos ? line.size() : comma;
    std::size_t first = start;
    std::size_t last = stop;
    while (first < last && is_blank(line[first]))
      ++first;
    while (last > first && is_blank(line[last - 1]))
      --last;
    out.push_back({line.substr(first, last - first), static_cast<std::int64_t>(first) + 1});
    if (comma == std::string_view::npos)
      return;
    start = comma + 1;
  }
}

std::string_view without_utf8_bom(std::string_view first_line) {
  constexpr std::string_view k_utf8_bom = "\xEF\xBB\xBF";
  if (first_line.starts_with(k_utf8_bom))
    first_line.remove_prefix(k_utf8_bom.size());
  return first_line;
}

std::string quote_field(std::string_view text) {
  if (text.empty())
    return "an empty field";
  constexpr std::size_t k_max = 60;
  std::string out = "\"";
  out += text.substr(0, k_max);
  if (text.size() > k_max)
    out += "...";
  return out + "\"";
}

}  // namespace exitsim
