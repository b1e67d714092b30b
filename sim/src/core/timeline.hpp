#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/chrome_trace.hpp"

namespace exitsim::sim {

// The simulated iterations of every replica as Chrome trace events (one track per replica, with
// batch-size and KV-block counters), viewable in Perfetto. Capped in size by the writer.
class IterationTimeline {
 public:
  IterationTimeline(const std::string& path, double max_mb, int replicas);
  void record(const IterationRecord& iteration);
  void finish() { writer_.finish(); }
  bool truncated() const { return writer_.truncated(); }
  std::int64_t events_dropped() const { return writer_.dropped_events(); }

 private:
  traces::ChromeTraceWriter writer_;
  std::vector<traces::ChromeTrack> iteration_tracks_;
  std::vector<traces::ChromeTrack> counter_tracks_;
};

}  // namespace exitsim::sim
