#include "exitsim/traces/op_grid.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

#include "exitsim/core/error.hpp"
#include "trace_io.hpp"

namespace exitsim::traces {

bool is_op_grid(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first))
    return false;
  if (!first.empty() && first.back() == '\r')
    first.pop_back();
  return first == k_op_grid_version_line;
}

OpGridWriter::OpGridWriter(const std::string& path)
    : file_(std::make_unique<detail::AtomicOutputFile>(path)) {
  std::string preamble(k_op_grid_version_line);
  preamble += '\n';
  for (std::size_t i = 0; i < k_op_grid_columns.size(); ++i)
    preamble += (i > 0 ? "," : "") + std::string(k_op_grid_columns[i]);
  file_->write(preamble + "\n");
}

OpGridWriter::~OpGridWriter() = default;

void OpGridWriter::write(const OpGridRow& row) {
  std::string line;
  detail::append_csv_field(line, row.op);
  line +=
      fmt::format(",{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n", to_string(row.kind),
                  row.shape, row.layer, row.recursion, row.batch_tokens, row.context_tokens,
                  row.repetitions, row.median_us, row.p10_us, row.p90_us, row.min_us, row.max_us);
  file_->write(line);
}

void OpGridWriter::finish() {
  file_->finish();
}

OpGridReader::OpGridReader(const std::string& path)
    : csv_(std::make_unique<detail::CsvRecordReader>(detail::open_input(path), path)) {
  csv_->expect_preamble(k_op_grid_version_line, k_op_grid_columns);
}

OpGridReader::~OpGridReader() = default;

const std::string& OpGridReader::name() const {
  return csv_->file();
}

std::optional<OpGridRow> OpGridReader::next() {
  std::vector<detail::CsvField> fields;
  if (!csv_->next(fields))
    return std::nullopt;
  const detail::RowParser p(*csv_, k_op_grid_columns, fields);
  OpGridRow row;
  row.op = p.text(0, /*allow_empty=*/false);
  const std::string& kind = p.text(1, /*allow_empty=*/false);
  const std::optional<OpKind> parsed = parse_op_kind(kind);
  if (!parsed)
    throw p.error(1, expected_found("an op kind (gemm, attention, ...)", detail::shown(kind)));
  row.kind = *parsed;
  row.shape = p.text(2, /*allow_empty=*/false);
  if (row.shape != "decode" && row.shape != "prefill")
    throw p.error(2, expected_found("decode or prefill", detail::shown(row.shape)));
  row.layer = p.int32(3, 0);
  row.recursion = p.int32(4, 0);
  row.batch_tokens = p.int64(5, 1);
  row.context_tokens = p.int64(6, 0);
  row.repetitions = p.int64(7, 1);
  const auto time = [&](std::size_t index) {
    const double us = p.optional_double(index);
    if (!std::isfinite(us) || us < 0)
      throw p.error(index, expected_found("a time in microseconds >= 0", "none or negative"));
    return us;
  };
  row.median_us = time(8);
  row.p10_us = time(9);
  row.p90_us = time(10);
  row.min_us = time(11);
  row.max_us = time(12);
  if (!(row.min_us <= row.p10_us && row.p10_us <= row.median_us && row.median_us <= row.p90_us &&
        row.p90_us <= row.max_us)) {
    throw p.error(8, expected_found("min_us <= p10_us <= median_us <= p90_us <= max_us",
                                    fmt::format("{} / {} / {} / {} / {}", row.min_us, row.p10_us,
                                                row.median_us, row.p90_us, row.max_us)));
  }
  return row;
}

}  // namespace exitsim::traces
