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

#include "exitsim/core/time.hpp"

namespace exitsim::traces {

namespace detail {
class AtomicOutputFile;
class CsvRecordReader;
}  // namespace detail

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

  // NaN scores compare equal here, so that a row read back equals the row written.
  friend bool operator==(const TokenTraceRow& a, const TokenTraceRow& b) {
    const bool same_score = (std::isnan(a.score) && std::isnan(b.score)) || a.score == b.score;
    return same_score && a.request_id == b.request_id && a.position == b.position &&
           a.exit_depth == b.exit_depth && a.exit_point == b.exit_point && a.policy == b.policy &&
           a.replica == b.replica && a.time_ns == b.time_ns;
  }
};

inline constexpr std::string_view k_token_trace_version_line = "# exitsim-token-trace v1";
inline constexpr std::array<std::string_view, 8> k_token_trace_columns = {
    "request_id", "position", "exit_depth", "exit_point", "score", "policy", "replica", "time_ns"};

// Streams rows to `path`. Nothing appears at `path` until finish() succeeds; destroying an
// unfinished writer deletes the partial output.
class TokenTraceWriter {
 public:
  explicit TokenTraceWriter(const std::string& path);
  ~TokenTraceWriter();
  TokenTraceWriter(const TokenTraceWriter&) = delete;
  TokenTraceWriter& operator=(const TokenTraceWriter&) = delete;

  void write(const TokenTraceRow& row);
  // Throws InputError naming the file when the output cannot be completed.
  void finish();
  std::int64_t rows_written() const { return rows_; }

 private:
  std::unique_ptr<detail::AtomicOutputFile> file_;
  std::string line_;
  std::int64_t rows_ = 0;
};

// Streams rows from a token trace; holds one row at a time. Every malformed row throws an
// InputError that names the file, the line and the column.
class TokenTraceReader {
 public:
  explicit TokenTraceReader(const std::string& path);
  // `name` stands for the file in error messages.
  TokenTraceReader(std::unique_ptr<std::istream> in, std::string name);
  ~TokenTraceReader();
  TokenTraceReader(const TokenTraceReader&) = delete;
  TokenTraceReader& operator=(const TokenTraceReader&) = delete;

  std::optional<TokenTraceRow> next();
  // The line the row next() last returned starts on (1-based), for errors about its values.
  std::int64_t line() const;

 private:
  std::unique_ptr<detail::CsvRecordReader> csv_;
};

}  // namespace exitsim::traces
