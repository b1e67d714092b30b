#include "exitsim/traces/token_trace.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "trace_io.hpp"

namespace exitsim::traces {

TokenTraceWriter::TokenTraceWriter(const std::string& path)
    : file_(std::make_unique<detail::AtomicOutputFile>(path)) {
  std::string preamble(k_token_trace_version_line);
  preamble += '\n';
  for (std::size_t i = 0; i < k_token_trace_columns.size(); ++i) {
    if (i > 0)
      preamble += ',';
    preamble += k_token_trace_columns[i];
  }
  preamble += '\n';
  file_->write(preamble);
}

TokenTraceWriter::~TokenTraceWriter() = default;

void TokenTraceWriter::write(const TokenTraceRow& row) {
  line_.clear();
  fmt::format_to(std::back_inserter(line_), "{},{},{},{},", row.request_id, row.position,
                 row.exit_depth, row.exit_point);
  // fmt prints the shortest text that reads back to the same double.
  if (std::isfinite(row.score))
    fmt::format_to(std::back_inserter(line_), "{}", row.score);
  line_ += ',';
  detail::append_csv_field(line_, row.policy);
  fmt::format_to(std::back_inserter(line_), ",{},{}\n", row.replica, row.time_ns);
  file_->write(line_);
  ++rows_;
}

void TokenTraceWriter::finish() {
  file_->finish();
}

TokenTraceReader::TokenTraceReader(const std::string& path)
    : TokenTraceReader(detail::open_input(path), path) {}

TokenTraceReader::TokenTraceReader(std::unique_ptr<std::istream> in, std::string name)
    : csv_(std::make_unique<detail::CsvRecordReader>(std::move(in), std::move(name))) {
  csv_->expect_preamble(k_token_trace_version_line, k_token_trace_columns);
}

TokenTraceReader::~TokenTraceReader() = default;

std::optional<TokenTraceRow> TokenTraceReader::next() {
  std::vector<detail::CsvField> fields;
  if (!csv_->next(fields))
    return std::nullopt;
  const detail::RowParser p(*csv_, k_token_trace_columns, fields);
  TokenTraceRow row;
  row.request_id = p.uint64(0);
  row.position = p.int64(1, 0);
  row.exit_depth = p.int32(2, 0);
  row.exit_point = p.int32(3, 0);
  row.score = p.optional_double(4);
  row.policy = p.text(5, /*allow_empty=*/false);
  row.replica = p.int32(6, 0);
  row.time_ns = p.int64(7, 0);
  return row;
}

std::int64_t TokenTraceReader::line() const {
  return csv_->record_line();
}

}  // namespace exitsim::traces
