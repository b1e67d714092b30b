#pragma once
// The definitions of CsvRowWriter and CsvRowReader, included by the source of each row type after
// its CsvRowFormat, which provides:
//   static constexpr std::string_view version_line;
//   static constexpr std::array<std::string_view, N> columns;
//   static void append(std::string& line, const Row& row);  // one data line, with its '\n'
//   static Row parse(const RowParser& fields);              // throws InputError naming the field
// and optionally
//   static constexpr std::size_t required_columns;  // the leading columns every file has (the
//                                                   // rest were added later: RowParser::has)

#include <string>
#include <utility>
#include <vector>

#include "exitsim/traces/csv_rows.hpp"
#include "trace_io.hpp"

namespace exitsim::traces {

template <typename Row>
struct CsvRowFormat;

template <typename Row>
constexpr std::size_t required_columns() {
  if constexpr (requires { CsvRowFormat<Row>::required_columns; })
    return CsvRowFormat<Row>::required_columns;
  else
    return CsvRowFormat<Row>::columns.size();
}

template <typename Row>
CsvRowWriter<Row>::CsvRowWriter(const std::string& path)
    : file_(std::make_unique<detail::AtomicOutputFile>(path)) {
  std::string preamble(CsvRowFormat<Row>::version_line);
  preamble += '\n';
  for (std::size_t i = 0; i < CsvRowFormat<Row>::columns.size(); ++i) {
    if (i > 0)
      preamble += ',';
    preamble += CsvRowFormat<Row>::columns[i];
  }
  preamble += '\n';
  file_->write(preamble);
}

template <typename Row>
CsvRowWriter<Row>::~CsvRowWriter() = default;

template <typename Row>
void CsvRowWriter<Row>::write(const Row& row) {
  line_.clear();
  CsvRowFormat<Row>::append(line_, row);
  file_->write(line_);
  ++rows_;
}

template <typename Row>
void CsvRowWriter<Row>::finish() {
  file_->finish();
}

template <typename Row>
CsvRowReader<Row>::CsvRowReader(const std::string& path)
    : CsvRowReader(detail::open_input(path), path) {}

template <typename Row>
CsvRowReader<Row>::CsvRowReader(std::unique_ptr<std::istream> in, std::string name)
    : csv_(std::make_unique<detail::CsvRecordReader>(std::move(in), std::move(name))) {
  csv_->expect_preamble(CsvRowFormat<Row>::version_line, CsvRowFormat<Row>::columns,
                        required_columns<Row>());
}

template <typename Row>
CsvRowReader<Row>::~CsvRowReader() = default;

template <typename Row>
std::optional<Row> CsvRowReader<Row>::next() {
  std::vector<detail::CsvField> fields;
  if (!csv_->next(fields))
    return std::nullopt;
  const std::span<const std::string_view> columns =
      std::span<const std::string_view>(CsvRowFormat<Row>::columns).first(csv_->header_columns());
  return CsvRowFormat<Row>::parse(detail::RowParser(*csv_, columns, fields));
}

template <typename Row>
const std::string& CsvRowReader<Row>::name() const {
  return csv_->file();
}

template <typename Row>
std::int64_t CsvRowReader<Row>::line() const {
  return csv_->record_line();
}

}  // namespace exitsim::traces
