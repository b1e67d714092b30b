#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "exitsim/sim/workload/arrivals.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::sim {

// Replays a request trace as a workload, streaming (O(1) state however long the trace):
// - every arrival is divided by `rate_scale` (k > 0) and rounded to the nearest nanosecond, so
//   k = 2 replays the trace twice as fast;
// - at most `cap` requests are produced (0 = all), and notes() says how many the trace holds;
// - when the trace has no timestamps (length-only traces), arrivals come from `arrivals`, and the
//   same scaling applies, so sweeping the scale raises the load whichever kind of trace is used.
class TraceReplaySource final : public traces::RequestSource {
 public:
  // `arrivals` may be null when `trace` has arrivals; it is required otherwise.
  TraceReplaySource(std::unique_ptr<traces::RequestSource> trace, double rate_scale,
                    std::int64_t cap, std::unique_ptr<ArrivalProcess> arrivals);

  std::optional<RequestDescriptor> next() override;
  std::int64_t skipped_rows() const override { return trace_->skipped_rows(); }
  bool has_arrivals() const override { return true; }
  std::string format_name() const override { return trace_->format_name(); }
  // The cap, as "replayed the first N of M requests of the trace" (M counted by reading on), and
  // skipped rows.
  std::vector<std::string> notes() override;

 private:
  std::unique_ptr<traces::RequestSource> trace_;
  double rate_scale_;
  std::int64_t cap_;
  std::int64_t emitted_ = 0;
  std::unique_ptr<ArrivalProcess> arrivals_;
};

}  // namespace exitsim::sim
