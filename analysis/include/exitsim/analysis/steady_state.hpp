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
  // The queue test: the steady window's arrivals are cut into `batches` consecutive batches and
  // the batch means of their queueing delay (arrival to first scheduled) regressed on the batch
  // index. The queue grows when the slope's t statistic exceeds `trend_t` (one-sided, about 1%
  // with 8 degrees of freedom) and the fitted rise over the window is material: above
  // `min_rise_ms` and `min_rise_fraction` of the run's median E2E latency.
  //
  // Why queueing delay and batch means: requests in the system (Little's law) ramp for as long
  // as the longest request lives, far past any warm-up a run can afford, and they are strongly
  // autocorrelated; a waiting queue is near empty below capacity and grows without bound above
  // it, and batch means of a stationary series are nearly independent.
  int batches = 10;
  double trend_t = 2.9;
  double min_rise_ms = 20;
  double min_rise_fraction = 0.1;
};

struct SteadyState {
  std::size_t requests = 0;          // in the steady window
  std::size_t warm_up_requests = 0;  // arrivals before it
  // The window holds under a third of the run: too short to judge a trend (the queue test is not
  // applied, and a plan says so).
  bool window_too_short = false;
  double attainment = 0;  // of the SLOs, over those requests
  // The queue test (SteadyStateOptions): mean queueing delay of the window's first and last
  // batch, the regression's t statistic and its fitted rise over the window.
  double queue_delay_first_ms = 0;
  double queue_delay_last_ms = 0;
  double queue_trend_t = 0;
  double queue_rise_ms = 0;
  bool queue_growing = false;
  double ttft_p99_ms = 0;  // over the steady window (nearest rank)
  double tpot_p99_ms = 0;
  // What the window's arrivals asked for per second of their arrival span: in a steady state
  // that is what the system serves, without the warm-up's ramp or the drain's tail.
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
};

// The steady state of a run from its finished requests (any order). A run with fewer than 20
// requests has no steady window to speak of: its whole run is the window, and the queue test is
// not applied.
SteadyState steady_state(std::span<const sim::RequestRecord> requests, const sim::SloTargets& slo,
                         const SteadyStateOptions& options = {});

// The completion rate (requests/s) of a backlogged run (every request waiting from the start)
// between the completions of `trim` and 1 - `trim` of its requests: the replica's saturation
// throughput for this mix, the rate no sustainable load reaches. 0 with fewer than 20 requests.
double saturation_requests_per_s(std::span<const sim::RequestRecord> requests, double trim = 0.2);

}  // namespace exitsim::analysis
