#include "exitsim/traces/op_trace.hpp"

#include <fmt/format.h>

#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "trace_io.hpp"

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

OpTraceWriter::OpTraceWriter(const std::string& path)
    : file_(std::make_unique<detail::AtomicOutputFile>(path)) {
  std::string preamble(k_op_trace_version_line);
  preamble += '\n';
  for (std::size_t i = 0; i < k_op_trace_columns.size(); ++i) {
    if (i > 0)
      preamble += ',';
    preamble += k_op_trace_columns[i];
  }
  preamble += '\n';
  file_->write(preamble);
}

OpTraceWriter::~OpTraceWriter() = default;

void OpTraceWriter::write(const OpTraceRow& row) {
  line_.clear();
  detail::append_csv_field(line_, row.name);
  line_ += ',';
  line_ += to_string(row.kind);
  line_ += ',';
  detail::append_csv_field(line_, row.device);
  fmt::format_to(std::back_inserter(line_), ",{},{},{},{},{},{},{},{},{}\n", row.stream,
                 row.start_ns, row.duration_ns, row.batch_tokens, row.context_tokens, row.depth,
                 row.recursion, row.step_id, row.correlation_id);
  file_->write(line_);
  ++rows_;
}

void OpTraceWriter::finish() {
  file_->finish();
}

OpTraceReader::OpTraceReader(const std::string& path)
    : OpTraceReader(detail::open_input(path), path) {}

OpTraceReader::OpTraceReader(std::unique_ptr<std::istream> in, std::string name)
    : csv_(std::make_unique<detail::CsvRecordReader>(std::move(in), std::move(name))) {
  csv_->expect_preamble(k_op_trace_version_line, k_op_trace_columns);
}

OpTraceReader::~OpTraceReader() = default;

const std::string& OpTraceReader::name() const {
  return csv_->file();
}

std::optional<OpTraceRow> OpTraceReader::next() {
  std::vector<detail::CsvField> fields;
  if (!csv_->next(fields))
    return std::nullopt;
  const detail::RowParser p(*csv_, k_op_trace_columns, fields);
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

}  // namespace exitsim::traces
