#include "exitsim/sim/workload/trace_replay_source.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::sim {
namespace {

// The arrival replayed at `rate_scale`; a slow-down (a scale below 1) may not push it past
// k_max_arrival_ns, the rest of the clock being the run's.
TimeNs scaled(TimeNs arrival, double rate_scale) {
  if (rate_scale == 1.0)
    return arrival;
  const double ns = std::floor(static_cast<double>(arrival) / rate_scale + 0.5);
  if (!(ns <= static_cast<double>(k_max_arrival_ns))) {
    throw_setting_error("workload.trace.rate_scale",
                        "a scale that keeps the replayed arrivals within 2^62 ns (about 146 years)",
                        fmt::format("{} (the arrival at {} ns would be replayed at {:.3g} ns)",
                                    rate_scale, arrival, ns));
  }
  return static_cast<TimeNs>(ns);
}

}  // namespace

TraceReplaySource::TraceReplaySource(std::unique_ptr<traces::RequestSource> trace,
                                     double rate_scale, std::int64_t cap,
                                     std::unique_ptr<ArrivalProcess> arrivals)
    : trace_(std::move(trace)), rate_scale_(rate_scale), cap_(cap), arrivals_(std::move(arrivals)) {
  if (!(rate_scale > 0.0) || !std::isfinite(rate_scale) || cap < 0) {
    throw std::invalid_argument("TraceReplaySource: rate_scale must be > 0 and cap >= 0");
  }
  if (!trace_->has_arrivals() && arrivals_ == nullptr) {
    throw std::invalid_argument("TraceReplaySource: a trace without arrivals needs a process");
  }
}

std::optional<RequestDescriptor> TraceReplaySource::next() {
  if (cap_ > 0 && emitted_ >= cap_)
    return std::nullopt;
  std::optional<RequestDescriptor> request = trace_->next();
  if (!request)
    return std::nullopt;
  ++emitted_;
  if (!request->arrival) {
    if (arrivals_ == nullptr) {
      throw std::logic_error(fmt::format("{} trace announced arrival times but request {} has none",
                                         trace_->format_name(), request->id.value));
    }
    request->arrival = arrivals_->next();
  }
  request->arrival = scaled(*request->arrival, rate_scale_);
  return request;
}

std::vector<std::string> TraceReplaySource::notes() {
  std::vector<std::string> out;
  if (cap_ > 0 && emitted_ >= cap_) {
    std::int64_t total = emitted_;
    while (trace_->next())
      ++total;
    if (total > emitted_) {
      out.push_back(fmt::format(
          "workload.trace.max_requests: replayed the first {} of the trace's {} requests", emitted_,
          total));
    }
  }
  if (const std::int64_t skipped = trace_->skipped_rows(); skipped > 0) {
    out.push_back(fmt::format("workload.trace: {} rows of the {} trace skipped (not replayed)",
                              skipped, trace_->format_name()));
  }
  return out;
}

}  // namespace exitsim::sim
