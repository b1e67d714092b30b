#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/atomic_output.hpp"

// Shared plumbing of the token-trace, op-trace and Chrome-trace files: a strict reader for
// versioned CSV (a "# exitsim-<kind> v<N>" line, a header row, data rows). Their all-or-nothing
// output file is the public exitsim/traces/atomic_output.hpp, which the simulator uses too.
namespace exitsim::traces::detail {

// Appends `text` to `line` as one CSV field, quoted RFC-4180 style when it holds a comma, a quote,
// a line break or leading/trailing blanks (which a reader would otherwise be tempted to trim).
void append_csv_field(std::string& line, std::string_view text);

struct CsvField {
  std::string text;
  std::int64_t column = 0;  // 1-based character column where the field starts
};

// Reads CSV records, honouring quoted fields (which may span lines), and makes the InputErrors
// that name the file, the record's line and the offending column.
class CsvRecordReader {
 public:
  CsvRecordReader(std::unique_ptr<std::istream> in, std::string file);

  // Checks the version line and the header row; throws InputError when either differs. The header
  // may stop after the first `required` columns (columns added to a format later are optional, so
  // that files written before them still read); header_columns() says how many it has.
  void expect_preamble(std::string_view version_line, std::span<const std::string_view> columns,
                       std::size_t required);
  std::size_t header_columns() const { return header_columns_; }
  // The next record, or false at the end of the input. Throws InputError on broken quoting.
  bool next(std::vector<CsvField>& fields);

  const std::string& file() const { return file_; }
  std::int64_t record_line() const { return record_line_; }
  InputError error(std::int64_t column, std::string field, const std::string& message) const;

 private:
  bool read_physical_line(std::string& line);

  std::unique_ptr<std::istream> in_;
  std::string file_;
  std::int64_t physical_line_ = 0;
  std::int64_t record_line_ = 0;
  std::size_t header_columns_ = 0;
  std::string line_;
};

// Opens `path` for reading or throws InputError naming it.
std::unique_ptr<std::istream> open_input(const std::string& path);

// "\"text\"" for messages, with control characters made visible and long text shortened.
std::string shown(std::string_view text);

// Typed access to one data row: each accessor validates the field and throws an InputError that
// names the file, line, column and column name.
class RowParser {
 public:
  RowParser(const CsvRecordReader& reader, std::span<const std::string_view> columns,
            const std::vector<CsvField>& fields);

  std::int64_t int64(std::size_t index, std::int64_t min_value = INT64_MIN) const;
  // An integer in [min_value, max_value]: bounds that keep later sums of the values in range.
  std::int64_t int64_within(std::size_t index, std::int64_t min_value,
                            std::int64_t max_value) const;
  std::uint64_t uint64(std::size_t index) const;
  int int32(std::size_t index, int min_value = INT32_MIN) const;
  // Empty field = NaN; otherwise a finite number.
  double optional_double(std::size_t index) const;
  const std::string& text(std::size_t index, bool allow_empty) const;
  // A ';'-separated list of numbers in [low, high] (empty field: none); `what` names one element
  // in the message ("a confidence in [0, 1]").
  std::vector<double> number_list(std::size_t index, double low, double high,
                                  std::string_view what) const;
  InputError error(std::size_t index, const std::string& message) const;
  // Whether the file has column `index` (an optional column added to the format later).
  bool has(std::size_t index) const { return index < columns_.size(); }

 private:
  const CsvRecordReader& reader_;
  std::span<const std::string_view> columns_;
  const std::vector<CsvField>& fields_;
};

}  // namespace exitsim::traces::detail
