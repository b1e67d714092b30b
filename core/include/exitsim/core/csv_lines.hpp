#pragma once

// Line-by-line reading of the strict CSV tables (exit tables, quality tables, cost tables):
// positions for error messages, the version line, rows split into fields, so that every table
// reader words its errors alike.

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exitsim/core/csv_fields.hpp"

namespace exitsim {

class CsvLineReader {
 public:
  CsvLineReader(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}

  // Throws InputError at the current line (column 0: the whole line).
  [[noreturn]] void fail(std::int64_t column, const std::string& field,
                         const std::string& message) const;
  // Throws InputError at the line after the last one read, where the missing content belongs.
  [[noreturn]] void fail_at_end(const std::string& field, const std::string& message) const;

  // Reads the next line (without its "\n" or "\r\n"); false at the end of the input.
  bool next_line();
  // The next line that is neither blank nor a comment ('#' first after blanks): rows may carry
  // provenance between them.
  bool next_content_line();
  // Throws InputError (field "version") unless line 1 has been read and is `version`.
  void check_version(std::string_view version) const;
  // Splits the current line; throws InputError (field "row") unless it has `columns` fields.
  const std::vector<CsvField>& split_row(std::size_t columns);

  const std::string& line() const { return line_; }
  std::int64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }

 private:
  std::istream& in_;
  std::string name_;
  std::string line_;
  std::int64_t line_number_ = 0;
  std::vector<CsvField> cells_;
};

}  // namespace exitsim
