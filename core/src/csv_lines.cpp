#include "exitsim/core/csv_lines.hpp"

#include "exitsim/core/error.hpp"

namespace exitsim {

void CsvLineReader::fail(std::int64_t column, const std::string& field,
                         const std::string& message) const {
  throw InputError(SourceLocation{name_, line_number_, column, field}, message);
}

void CsvLineReader::fail_at_end(const std::string& field, const std::string& message) const {
  throw InputError(SourceLocation{name_, line_number_ + 1, 0, field}, message);
}

bool CsvLineReader::next_line() {
  if (!std::getline(in_, line_))
    return false;
  ++line_number_;
  if (!line_.empty() && line_.back() == '\r')
    line_.pop_back();
  if (line_number_ == 1)
    line_ = std::string(without_utf8_bom(line_));
  return true;
}

bool CsvLineReader::next_content_line() {
  while (next_line()) {
    std::string_view t = line_;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t'))
      t.remove_prefix(1);
    if (!t.empty() && t.front() != '#')
      return true;
  }
  return false;
}

void CsvLineReader::check_version(std::string_view version) const {
  const std::string expected = "\"" + std::string(version) + "\"";
  if (line_number_ == 0) {
    throw InputError(SourceLocation{name_, 1, 0, "version"},
                     expected_found(expected, "an empty file"));
  }
  if (line_ != version)
    fail(0, "version",
         expected_found(expected, line_.empty() ? "an empty line" : quote_field(line_)));
}

const std::vector<CsvField>& CsvLineReader::split_row(std::size_t columns) {
  split_csv_fields(line_, cells_);
  if (cells_.size() != columns) {
    fail(0, "row",
         expected_found(std::to_string(columns) + " fields",
                        line_.empty() ? "an empty line" : std::to_string(cells_.size())));
  }
  return cells_;
}

}  // namespace exitsim
