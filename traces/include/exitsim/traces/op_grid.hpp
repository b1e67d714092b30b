#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "exitsim/traces/op_trace.hpp"

// An op grid: engine ops timed in isolation over batch tokens x attention context (`exitsim
// engine profile-ops`), one row per op and point with the median and spread of its repetitions.
// `exitsim calibrate` fits from it as from op traces. Schema in docs/traces.md.
namespace exitsim::traces {

struct OpGridRow {
  std::string op;  // as in engine_ops.hpp
  OpKind kind = OpKind::other;
  std::string shape;  // "decode" or "prefill" (engine/op_timing.hpp)
  int layer = 0;      // the executed layer timed
  int recursion = 0;
  std::int64_t batch_tokens = 0;
  std::int64_t context_tokens = 0;  // (query, key) pairs, as op traces count them
  std::int64_t repetitions = 0;
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  double min_us = 0;
  double max_us = 0;

  friend bool operator==(const OpGridRow&, const OpGridRow&) = default;
};

inline constexpr std::string_view k_op_grid_version_line = "# exitsim-op-grid v1";
inline constexpr std::array<std::string_view, 13> k_op_grid_columns = {
    "op",          "kind",      "shape",  "layer",  "recursion", "batch_tokens", "context_tokens",
    "repetitions", "median_us", "p10_us", "p90_us", "min_us",    "max_us"};

// True when the file starts with the op grid's version line (calibrate tells grids from traces).
bool is_op_grid(const std::string& path);

// Op grids are written and read by the one writer and reader of exitsim's CSV files
// (csv_rows.hpp). Every malformed row throws an InputError naming the file, the line and the
// column: a shape other than decode/prefill, a negative or non-finite time, percentiles out of
// order (min <= p10 <= median <= p90 <= max), no repetitions.
using OpGridWriter = CsvRowWriter<OpGridRow>;
using OpGridReader = CsvRowReader<OpGridRow>;

}  // namespace exitsim::traces
