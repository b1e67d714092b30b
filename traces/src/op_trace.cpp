#include "exitsim/traces/op_trace.hpp"

#include <fmt/format.h>

#include "csv_rows_impl.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"

namespace exitsim::traces {
namespace {

constexpr std::array<OpKind, 9> k_all_op_kinds = {
    OpKind::gemm,     OpKind::attention, OpKind::norm,   OpKind::elementwise, OpKind::lm_head,
    OpKind::sampling, OpKind::router,    OpKind::memcpy, OpKind::other};

}  // namespace

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::gemm:
      return "gemm";
    case OpKind::attention:
      return "attention";
    case OpKind::norm:
      return "norm";
    case OpKind::elementwise:
      return "elementwise";
    case OpKind::lm_head:
      return "lm_head";
    case OpKind::sampling:
      return "sampling";
    case OpKind::router:
      return "router";
    case OpKind::memcpy:
      return "memcpy";
    case OpKind::other:
      return "other";
  }
  return "other";
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (OpKind kind : k_all_op_kinds) {
    if (to_string(kind) == name)
      return kind;
  }
  return std::nullopt;
}

std::vector<std::string> op_kind_names() {
  std::vector<std::string> names;
  for (OpKind kind : k_all_op_kinds)
    names.emplace_back(to_string(kind));
  return names;
}

template <>
struct CsvRowFormat<OpTraceRow> {
  static constexpr std::string_view version_line = k_op_trace_version_line;
  static constexpr const auto& columns = k_op_trace_columns;

  static void append(std::string& line, const OpTraceRow& row) {
    detail::append_csv_field(line, row.name);
    line += ',';
    line += to_string(row.kind);
    line += ',';
    detail::append_csv_field(line, row.device);
    fmt::format_to(std::back_inserter(line), ",{},{},{},{},{},{},{},{},{}\n", row.stream,
                   row.start_ns, row.duration_ns, row.batch_tokens, row.context_tokens, row.depth,
                   row.recursion, row.step_id, row.correlation_id);
  }

  static OpTraceRow parse(const detail::RowParser& p) {
    OpTraceRow row;
    row.name = p.text(0, /*allow_empty=*/false);
    const std::string& kind = p.text(1, /*allow_empty=*/false);
    const std::optional<OpKind> parsed = parse_op_kind(kind);
    if (!parsed) {
      const std::vector<std::string> names = op_kind_names();
      std::string message = expected_found(one_of(names), detail::shown(kind));
      const std::string hint = nearest_match(kind, names);
      if (!hint.empty())
        message += fmt::format(" (did you mean {}?)", hint);
      throw p.error(1, message);
    }
    row.kind = *parsed;
    row.device = p.text(2, /*allow_empty=*/false);
    row.stream = p.int32(3, 0);
    // Times within 2^61 ns (73 years) either way and counts within 2^40: the analysis adds starts
    // and durations and multiplies counts, which must not overflow.
    constexpr std::int64_t k_max_ns = std::int64_t{1} << 61;
    constexpr std::int64_t k_max_count = std::int64_t{1} << 40;
    row.start_ns = p.int64_within(4, -k_max_ns, k_max_ns);
    row.duration_ns = p.int64_within(5, 0, k_max_ns);
    row.batch_tokens = p.int64_within(6, 0, k_max_count);
    row.context_tokens = p.int64_within(7, 0, k_max_count);
    row.depth = p.int32(8, -1);
    row.recursion = p.int32(9, 0);
    row.step_id = p.uint64(10);
    row.correlation_id = p.uint64(11);
    return row;
  }
};

template class CsvRowWriter<OpTraceRow>;
template class CsvRowReader<OpTraceRow>;

}  // namespace exitsim::traces
