#include "metrics/usage_series.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace exitsim::sim::metrics_detail {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw std::invalid_argument("MetricsCollector: " + message);
}

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b.
TimeNs ceil_div(TimeNs a, TimeNs b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace

UsageSeries::UsageSeries(int replicas, TimeNs window, std::size_t max_points)
    : window_(window), max_points_(max_points) {
  if (replicas < 1)
    invalid(fmt::format("replicas must be >= 1, got {}", replicas));
  if (window < 1)
    invalid(fmt::format("series_window must be >= 1 ns, got {}", window));
  if (max_points < 2)
    invalid(fmt::format("max_series_points must be >= 2, got {}", max_points));
  replicas_.resize(static_cast<std::size_t>(replicas));
}

TimeNs UsageSeries::window_end(std::size_t index, TimeNs limit) const {
  const TimeNs begin = static_cast<TimeNs>(index) * window_;
  return limit - begin <= window_ ? limit : begin + window_;
}

void UsageSeries::extend_to(TimeNs end) {
  // Once window_ > 2^62 any end below 2^63 needs at most two windows, so with max_points_ >= 2
  // the loop stops before doubling could overflow.
  while (static_cast<std::size_t>(ceil_div(end, window_)) > max_points_) {
    std::vector<Window> merged((windows_.size() + 1) / 2);
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      merged[i / 2].busy += windows_[i].busy;
      merged[i / 2].kv += windows_[i].kv;
    }
    windows_ = std::move(merged);
    window_ *= 2;
  }
  const auto needed = static_cast<std::size_t>(ceil_div(end, window_));
  if (windows_.size() < needed)
    windows_.resize(needed);
}

void UsageSeries::accumulate(std::vector<Window>& windows, TimeNs begin, TimeNs end,
                             double fraction, bool busy) const {
  for (auto index = static_cast<std::size_t>(begin / window_); begin < end; ++index) {
    const TimeNs stop = window_end(index, end);
    const TimeNs overlap = stop - begin;
    windows[index].kv += fraction * static_cast<double>(overlap);
    if (busy)
      windows[index].busy += overlap;
    begin = stop;
  }
}

void UsageSeries::add(const IterationRecord& iteration) {
  if (iteration.replica < 0 || static_cast<std::size_t>(iteration.replica) >= replicas_.size()) {
    invalid(fmt::format("iteration on replica {}, expected 0 to {}", iteration.replica,
                        replicas_.size() - 1));
  }
  if (iteration.start < 0 || iteration.duration < 0) {
    invalid(fmt::format("iteration with start {} ns and duration {} ns", iteration.start,
                        iteration.duration));
  }
  if (iteration.duration > std::numeric_limits<TimeNs>::max() - iteration.start)
    invalid(fmt::format("iteration end past the int64 range (start {} ns)", iteration.start));
  if (iteration.kv_blocks_total < 0 || iteration.kv_blocks_used < 0 ||
      iteration.kv_blocks_used > iteration.kv_blocks_total) {
    invalid(fmt::format("iteration with {} of {} KV blocks used", iteration.kv_blocks_used,
                        iteration.kv_blocks_total));
  }
  Replica& replica = replicas_[static_cast<std::size_t>(iteration.replica)];
  if (iteration.start < replica.until) {
    invalid(
        fmt::format("iteration on replica {} starts at {} ns, before its previous one ended "
                    "at {} ns",
                    iteration.replica, iteration.start, replica.until));
  }
  const TimeNs end = iteration.start + iteration.duration;
  extend_to(end);
  end_ = std::max(end_, end);
  // A replica without KV accounting (total 0) counts as using none.
  const double fraction = iteration.kv_blocks_total == 0
                              ? 0.0
                              : static_cast<double>(iteration.kv_blocks_used) /
                                    static_cast<double>(iteration.kv_blocks_total);
  accumulate(windows_, replica.until, iteration.start, replica.fraction, false);
  accumulate(windows_, iteration.start, end, fraction, true);
  replica.until = end;
  replica.fraction = fraction;
}

void UsageSeries::set_usage(int replica_index, TimeNs time, std::int64_t used, std::int64_t total) {
  if (replica_index < 0 || static_cast<std::size_t>(replica_index) >= replicas_.size())
    invalid(fmt::format("usage on replica {}", replica_index));
  if (total < 0 || used < 0 || used > total)
    invalid(fmt::format("usage of {} of {} KV blocks", used, total));
  Replica& replica = replicas_[static_cast<std::size_t>(replica_index)];
  if (time != replica.until) {
    invalid(
        fmt::format("usage change on replica {} at {} ns, not at the end of its latest "
                    "iteration ({} ns)",
                    replica_index, time, replica.until));
  }
  replica.fraction = total == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(total);
}

std::vector<SeriesPoint> UsageSeries::points() const {
  std::vector<Window> windows = windows_;
  // Idle replicas keep their last usage up to the end of the series.
  for (const Replica& replica : replicas_)
    accumulate(windows, replica.until, end_, replica.fraction, false);
  const double replicas = static_cast<double>(replicas_.size());
  std::vector<SeriesPoint> points;
  points.reserve(windows.size());
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const TimeNs start = static_cast<TimeNs>(i) * window_;
    const double capacity = static_cast<double>(window_end(i, end_) - start) * replicas;
    SeriesPoint point;
    point.start = start;
    point.kv_usage = windows[i].kv / capacity;
    point.utilization = static_cast<double>(windows[i].busy) / capacity;
    points.push_back(point);
  }
  return points;
}

}  // namespace exitsim::sim::metrics_detail
