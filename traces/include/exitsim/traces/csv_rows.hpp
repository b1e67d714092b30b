#pragma once
// One writer and one reader for exitsim's versioned CSV files (a "# exitsim-<kind> v<N>" line, a
// header row, data rows): the op trace, the token trace and the op grid. What differs per file
// is its row type's CsvRowFormat (version line, columns, how a row is written and read), which
// each file's source defines beside the explicit instantiations.

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>

namespace exitsim::traces {

namespace detail {
class AtomicOutputFile;
class CsvRecordReader;
}  // namespace detail

// Streams rows to `path`. Nothing appears at `path` until finish() succeeds; destroying an
// unfinished writer deletes the partial output.
template <typename Row>
class CsvRowWriter {
 public:
  explicit CsvRowWriter(const std::string& path);
  ~CsvRowWriter();
  CsvRowWriter(const CsvRowWriter&) = delete;
  CsvRowWriter& operator=(const CsvRowWriter&) = delete;

  void write(const Row& row);
  // Throws InputError naming the file when the output cannot be completed.
  void finish();
  std::int64_t rows_written() const { return rows_; }

 private:
  std::unique_ptr<detail::AtomicOutputFile> file_;
  std::string line_;
  std::int64_t rows_ = 0;
};

// Streams rows from a file; holds one row at a time. A version line or header other than the
// row type's, and every malformed row, throw an InputError that names the file, the line and the
// column.
template <typename Row>
class CsvRowReader {
 public:
  explicit CsvRowReader(const std::string& path);
  // `name` stands for the file in error messages.
  CsvRowReader(std::unique_ptr<std::istream> in, std::string name);
  ~CsvRowReader();
  CsvRowReader(const CsvRowReader&) = delete;
  CsvRowReader& operator=(const CsvRowReader&) = delete;

  std::optional<Row> next();
  const std::string& name() const;
  // The line the row next() last returned starts on (1-based), for errors about its values.
  std::int64_t line() const;

 private:
  std::unique_ptr<detail::CsvRecordReader> csv_;
};

}  // namespace exitsim::traces
