#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/analysis/steady_state.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

// Capacity planning (docs/pipeline.md, "Capacity planning"): the candidates are the points of the
// scenario's sweep (the base scenario when it has none); the SLOs are its `slo` section.
struct PlanOptions {
  std::string scenario_file;  // "" = the embedded default
  std::vector<std::string> overrides;
  // A load is sustainable when, over the run's steady window (warm-up and drain excluded,
  // steady_state.hpp), at least this fraction of requests meets every target and the queue does
  // not keep growing.
  double min_attainment = 0.9;
  // Either a target arrival rate (synthetic workload) or a scale of the replayed trace's rate
  // (workload.source: trace); neither: only the per-replica capacity is found.
  std::optional<double> target_rate;
  std::optional<double> trace_scale;
  // Price of one GPU-hour: `default_gpu_hour_price` for every accelerator, or per accelerator
  // (hardware.name) in `gpu_hour_prices`, which then must name every candidate's; neither = no
  // cost figures. A replica of parallel.tensor GPUs costs that many GPU-hours an hour.
  double gpu_hour_price = 0;
  std::map<std::string, double> gpu_hour_prices;
  // The backlogged run that measures saturation throughput has at least this many requests
  // (synthetic workloads; a trace replays what it holds): fewer see mostly its fill and drain.
  std::size_t saturation_min_requests = 4000;
  int bisection_steps = 8;  // halvings of the rate bracket
  int max_replicas = 256;
  unsigned jobs = 1;  // candidates planned at a time
  // Called (from one thread at a time) as each candidate's plan is done.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

struct CandidatePlan {
  SweepPoint point;
  // What one replica of the candidate runs on: its accelerator (hardware.name), the GPUs it
  // spans (parallel.tensor x parallel.pipeline) and the price of one of them per hour (0: no
  // prices given).
  std::string hardware;
  int tensor = 1;
  int pipeline = 1;
  int gpus_per_replica = 1;
  double gpu_hour_price = 0;
  // The highest load one replica sustains within the SLOs, and the run at it; 0 when even the
  // lowest load tried misses them. The load is the arrival rate in requests/s (synthetic
  // workloads) or the trace's rate scale (replayed traces), as `load_key` says.
  std::string load_key;
  double max_load_per_replica = 0;
  // The SLOs held at every load tried (start x 2^12): the capacity is at least
  // max_load_per_replica, not that figure; outputs mark it ">=".
  bool max_load_is_lower_bound = false;
  RunMetrics at_max_rate;
  SteadyState steady_at_max_rate;  // the steady window of that run
  // The replica's saturation throughput for this mix (a backlogged run: every request waiting
  // from the start; saturation_requests_per_s): no load at or above it is sustainable, whatever
  // a finite run's SLOs say. In the load's unit, and the requests it was measured over; 0 when
  // that run had too few requests to measure it (no bound then).
  double saturation_load = 0;
  std::size_t saturation_requests = 0;
  int simulations = 0;
  // For the target (rate or scaled trace): the fewest replicas that meet the SLOs, and the run
  // there; 0 when none up to max_replicas does or there is no target.
  int replicas = 0;
  int gpus = 0;  // replicas x gpus_per_replica
  // A disaggregated candidate (one prefill and one decode group, scheduler.role): the two pools,
  // sized apart (replicas is their sum; max_load_per_replica is then that of one prefill and one
  // decode replica together).
  bool disaggregated = false;
  int prefill_replicas = 0;
  int decode_replicas = 0;
  RunMetrics at_target;
  double cost_per_hour = 0;  // gpus x gpu_hour_price
  // Per million output tokens at the target's steady-state token rate (what the target's
  // requests ask for per second, the drain's tail excluded), and of one replica at its capacity.
  double cost_per_million_tokens = 0;
  double cost_per_million_tokens_at_capacity = 0;
};

struct Plan {
  std::vector<CandidatePlan> candidates;   // by point index
  std::optional<std::size_t> recommended;  // index into candidates
  std::string recommendation;              // one line, also when nothing qualifies
};

// Throws InputError when the scenario has no SLO (every rate would qualify), when a target rate
// is given for a trace workload or a trace scale for a synthetic one, and for bad options. The
// recommendation is the candidate that meets the target with the fewest GPUs, then the lowest
// cost per hour, then the most capacity per GPU.
Plan plan_capacity(const PlanOptions& options);

// The plan as CSV (one row per candidate) and as JSON (what `exitsim report` reads).
std::string plan_csv(const Plan& plan);
std::string plan_json(const Plan& plan);

}  // namespace exitsim::analysis
