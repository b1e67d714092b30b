#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim::metrics_detail {

// KV usage and utilization over time, in fixed-width windows from t = 0 that double in width
// (adjacent pairs merged) whenever the series would exceed its point budget.
//
// Each replica's KV usage is a step function: the kv_blocks_used / kv_blocks_total of its latest
// iteration that has started (0 before its first), held through the idle time that follows.
// Windows accumulate the exact integral of that function and the exact busy time, with every
// interval split at window boundaries; a point divides both by (window width x replicas). The
// series ends where the last iteration ends, so the final window may be narrower than the rest
// and is averaged over its own width.
class UsageSeries {
 public:
  // Throws std::invalid_argument unless replicas >= 1, window >= 1 and max_points >= 2 (two points
  // are what guarantee that doubling never overflows the window width).
  UsageSeries(int replicas, TimeNs window, std::size_t max_points);

  // Throws std::invalid_argument for an unknown replica, a negative start or duration, an end past
  // the int64 range, block counts outside 0 <= used <= total, or an iteration that starts before
  // the previous one of its replica ended.
  void add(const IterationRecord& iteration);

  // The replica's usage changes at `time` without an iteration starting (blocks freed when an
  // iteration completes). `time` must be the end of its latest iteration.
  void set_usage(int replica, TimeNs time, std::int64_t used, std::int64_t total);

  std::vector<SeriesPoint> points() const;
  TimeNs window() const { return window_; }

 private:
  struct Window {
    TimeNs busy = 0;  // replica-nanoseconds spent executing
    double kv = 0;    // integral of the usage fraction over the window, summed over replicas
  };
  struct Replica {
    TimeNs until = 0;     // the usage function is accumulated up to here
    double fraction = 0;  // usage since `until`
  };

  // Widens the windows until [0, end) fits in max_points_ of them, and allocates them.
  void extend_to(TimeNs end);
  void accumulate(std::vector<Window>& windows, TimeNs begin, TimeNs end, double fraction,
                  bool busy) const;
  // The end of window `index`, or `limit` if that comes first (computed without overflow).
  TimeNs window_end(std::size_t index, TimeNs limit) const;

  TimeNs window_;
  std::size_t max_points_;
  std::vector<Window> windows_;
  std::vector<Replica> replicas_;
  TimeNs end_ = 0;
};

}  // namespace exitsim::sim::metrics_detail
