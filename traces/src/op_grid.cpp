#include "exitsim/traces/op_grid.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

#include "csv_rows_impl.hpp"
#include "exitsim/core/error.hpp"

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

template <>
struct CsvRowFormat<OpGridRow> {
  static constexpr std::string_view version_line = k_op_grid_version_line;
  static constexpr const auto& columns = k_op_grid_columns;

  static void append(std::string& line, const OpGridRow& row) {
    detail::append_csv_field(line, row.op);
    line += fmt::format(",{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n",
                        to_string(row.kind), row.shape, row.layer, row.recursion, row.batch_tokens,
                        row.context_tokens, row.repetitions, row.median_us, row.p10_us, row.p90_us,
                        row.min_us, row.max_us);
  }

  static OpGridRow parse(const detail::RowParser& p) {
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
};

template class CsvRowWriter<OpGridRow>;
template class CsvRowReader<OpGridRow>;

}  // namespace exitsim::traces
