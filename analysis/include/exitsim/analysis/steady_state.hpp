#pragma once

// Whether a run's load is sustainable, judged on its steady state rather than on the whole
// finite run: a queue that keeps growing misses its SLOs eventually however good the run's
// first minutes look, and a run's warm-up and drain are not the service a user gets.

#include <cstddef>
#include <span>

#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

struct SteadyStateOptions {
  // At least this fraction of the arrivals is excluded at each end (warm-up, drain); the warm-up
  // also lasts until two median E2E latencies after the first arrival (the system is filling).
  double trim = 0.1;
  // The queue grows when the mean number of requests in the system seen by the arrivals of the
  // steady window's last third exceeds `growth_ratio` times that of its first third plus
  // `growth_slack`.
  double growth_ratio = 1.2;
  double growth_slack = 2.0;
};

struct SteadyState {
  std::size_t requests = 0;          // in the steady window
  std::size_t warm_up_requests = 0;  // arrivals before it
  // The window holds under a third of the run: too short to judge a trend (the queue test is not
  // applied, and a plan says so).
  bool window_too_short = false;
  double attainment = 0;  // of the SLOs, over those requests
  // Mean requests in the system (arrived, not finished) seen by the window's arrivals, over
  // its first and last third.
  double in_system_first_half = 0;
  double in_system_second_half = 0;
  bool queue_growing = false;
  double ttft_p99_ms = 0;  // over the steady window (nearest rank)
  double tpot_p99_ms = 0;
};

// The steady state of a run from its finished requests (any order). A run with fewer than 20
// requests has no steady window to speak of: its whole run is the window, and the queue test is
// not applied.
SteadyState steady_state(std::span<const sim::RequestRecord> requests, const sim::SloTargets& slo,
                         const SteadyStateOptions& options = {});

}  // namespace exitsim::analysis
