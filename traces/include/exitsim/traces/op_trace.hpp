#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/traces/csv_rows.hpp"

namespace exitsim::traces {

// What an op does, as far as calibration cares: each kind gets its own cost model.
enum class OpKind : std::uint8_t {
  gemm,
  attention,
  norm,
  elementwise,
  lm_head,
  sampling,
  router,
  memcpy,
  other
};

std::string_view to_string(OpKind kind);
std::optional<OpKind> parse_op_kind(std::string_view name);
std::vector<std::string> op_kind_names();

// One measured op (a host span or a GPU activity record). Schema in docs/traces.md.
struct OpTraceRow {
  std::string name;  // e.g. "attn.decode", or a kernel's demangled name
  OpKind kind = OpKind::other;
  std::string device = "cpu";  // "cpu", "cuda:0", ...
  int stream = 0;              // CUDA stream, or host thread index
  TimeNs start_ns = 0;
  TimeNs duration_ns = 0;
  std::int64_t batch_tokens = 0;
  std::int64_t context_tokens = 0;
  int depth = -1;     // layer index in the unrolled stack; -1 = outside it (embedding, LM head)
  int recursion = 0;  // 0 for prelude, coda and plain models
  std::uint64_t step_id = 0;         // engine iteration
  std::uint64_t correlation_id = 0;  // links a host launch to its device work; 0 = none

  friend bool operator==(const OpTraceRow&, const OpTraceRow&) = default;
};

inline constexpr std::string_view k_op_trace_version_line = "# exitsim-op-trace v1";
inline constexpr std::array<std::string_view, 12> k_op_trace_columns = {
    "name",         "kind",           "device", "stream",    "start_ns", "duration_ns",
    "batch_tokens", "context_tokens", "depth",  "recursion", "step_id",  "correlation_id"};

// Op traces are written and read by the one writer and reader of exitsim's CSV files
// (csv_rows.hpp); every malformed row is an InputError naming the file, the line and the column.
using OpTraceWriter = CsvRowWriter<OpTraceRow>;
using OpTraceReader = CsvRowReader<OpTraceRow>;

}  // namespace exitsim::traces
