#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "exitsim/core/time.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::analysis {

// Exact order statistics of a token-length column. Percentiles use the nearest-rank rule: the
// p-th percentile of n values is the smallest value with at least ceil(p * n / 100) values at or
// below it, so every percentile is a length that occurs in the trace.
struct LengthSummary {
  std::int64_t min = 0;
  std::int64_t p50 = 0;
  std::int64_t p90 = 0;
  std::int64_t p95 = 0;
  std::int64_t p99 = 0;
  std::int64_t max = 0;
  double mean = 0.0;
};

struct TraceSummary {
  std::string format;  // the source's format_name()
  std::int64_t requests = 0;
  std::int64_t skipped_rows = 0;

  // Timing: present only when the trace carries arrivals.
  std::optional<TimeNs> first_arrival;
  std::optional<TimeNs> last_arrival;
  std::optional<TimeNs> span;  // last - first
  // (requests - 1) / span in requests per second; absent when the span is zero.
  std::optional<double> mean_rate_per_s;
  // Standard deviation over mean of the gaps between consecutive arrivals (population form);
  // 1 for a Poisson process. Absent with fewer than two requests or a zero mean gap.
  std::optional<double> interarrival_cv;

  LengthSummary input;
  LengthSummary output;
};

// Drains `source` in one pass. Memory grows with the number of distinct lengths, not with the
// number of requests. Propagates the source's InputError (including "no requests").
TraceSummary summarize_requests(traces::RequestSource& source);

// A readable multi-line block (what `exitsim trace inspect FILE` prints), ending in a newline.
std::string format_trace_summary(const TraceSummary& summary, std::string_view path,
                                 std::string_view format);

}  // namespace exitsim::analysis
