#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/traces/csv_rows.hpp"

namespace exitsim::traces {

// One emitted output token and the depth it exited at: what the engine measured and what the
// simulator's `replay` and `distribution` exit policies consume. Schema in docs/traces.md.
struct TokenTraceRow {
  std::uint64_t request_id = 0;
  std::int64_t position = 0;  // output position, 0 = first generated token
  int exit_depth = 0;         // executed layers before the coda
  int exit_point = 0;         // index into the model's effective exit points
  // The confidence or router score that decided the exit; NaN when the policy has none
  // (full_depth, oracle, position_schedule).
  double score = std::numeric_limits<double>::quiet_NaN();
  std::string policy;  // exit policy name, e.g. "confidence"
  int replica = 0;
  TimeNs time_ns = 0;  // emission time
  // adaptive_threshold runs (optional columns, absent from older traces): the token's confidence
  // at each exit point it was probed at, from the first (its exit point for a token that left
  // early, every point below the top for one that went deep), and the agreement flags of the
  // calibration pairs it gave, in the order the estimator received them (one, at its exit point,
  // for a token whose pending state reached the top; one per point below the top for a deep
  // token that carried a fill to the top; none otherwise). docs/traces.md, "Token trace".
  std::vector<double> confidences{};
  std::vector<std::uint8_t> agreements{};

  // NaN scores compare equal here, so that a row read back equals the row written.
  friend bool operator==(const TokenTraceRow& a, const TokenTraceRow& b) {
    const bool same_score = (std::isnan(a.score) && std::isnan(b.score)) || a.score == b.score;
    return same_score && a.request_id == b.request_id && a.position == b.position &&
           a.exit_depth == b.exit_depth && a.exit_point == b.exit_point && a.policy == b.policy &&
           a.replica == b.replica && a.time_ns == b.time_ns && a.confidences == b.confidences &&
           a.agreements == b.agreements;
  }
};

inline constexpr std::string_view k_token_trace_version_line = "# exitsim-token-trace v1";
inline constexpr std::array<std::string_view, 10> k_token_trace_columns = {
    "request_id", "position", "exit_depth", "exit_point",  "score",
    "policy",     "replica",  "time_ns",    "confidences", "agreements"};
// Traces written before `confidences` and `agreements` existed stop after time_ns.
inline constexpr std::size_t k_token_trace_required_columns = 8;

// Token traces are written and read by the one writer and reader of exitsim's CSV files
// (csv_rows.hpp); every malformed row is an InputError naming the file, the line and the column.
using TokenTraceWriter = CsvRowWriter<TokenTraceRow>;
using TokenTraceReader = CsvRowReader<TokenTraceRow>;

}  // namespace exitsim::traces
