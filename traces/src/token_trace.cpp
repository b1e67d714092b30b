#include "exitsim/traces/token_trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "csv_rows_impl.hpp"

namespace exitsim::traces {

template <>
struct CsvRowFormat<TokenTraceRow> {
  static constexpr std::string_view version_line = k_token_trace_version_line;
  static constexpr const auto& columns = k_token_trace_columns;
  static constexpr std::size_t required_columns = k_token_trace_required_columns;

  static void append(std::string& line, const TokenTraceRow& row) {
    fmt::format_to(std::back_inserter(line), "{},{},{},{},", row.request_id, row.position,
                   row.exit_depth, row.exit_point);
    // fmt prints the shortest text that reads back to the same double.
    if (std::isfinite(row.score))
      fmt::format_to(std::back_inserter(line), "{}", row.score);
    line += ',';
    detail::append_csv_field(line, row.policy);
    fmt::format_to(std::back_inserter(line), ",{},{},{},{}\n", row.replica, row.time_ns,
                   fmt::join(row.confidences, ";"), fmt::join(row.agreements, ";"));
  }

  static TokenTraceRow parse(const detail::RowParser& p) {
    TokenTraceRow row;
    row.request_id = p.uint64(0);
    row.position = p.int64(1, 0);
    row.exit_depth = p.int32(2, 0);
    row.exit_point = p.int32(3, 0);
    row.score = p.optional_double(4);
    row.policy = p.text(5, /*allow_empty=*/false);
    row.replica = p.int32(6, 0);
    row.time_ns = p.int64(7, 0);
    if (p.has(8))
      row.confidences = p.number_list(8, 0.0, 1.0, "a confidence in [0, 1]");
    if (p.has(9)) {
      for (const double flag : p.number_list(9, 0.0, 1.0, "an agreement flag, 0 or 1")) {
        if (flag != 0.0 && flag != 1.0)
          throw p.error(9, expected_found("agreement flags 0 or 1", fmt::format("{}", flag)));
        row.agreements.push_back(flag == 1.0 ? 1 : 0);
      }
    }
    return row;
  }
};

template class CsvRowWriter<TokenTraceRow>;
template class CsvRowReader<TokenTraceRow>;

}  // namespace exitsim::traces
