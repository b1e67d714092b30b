#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/policy/replica_router.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::sim {

// One replica of the cluster. Replicas may differ in model, hardware, cost model and scheduler.
struct ReplicaSpec {
  ModelShape model;
  HardwareSpec hardware;
  scenario::CostModelConfig cost_model;
  scenario::SchedulerConfig scheduler;
  scenario::ExitPolicyConfig exit_policy;  // kind "none": static depth
  scenario::SyncConfig sync;
  std::uint64_t seed = 0;   // the replica's exit draws come from streams seeded with it
  ParallelSpec parallel{};  // the GPUs the replica spans
};

using StepObserver = std::function<void(int replica, const policy::StepTrace&)>;

struct SimulationConfig {
  std::vector<ReplicaSpec> replicas;
  policy::ReplicaRouterKind router = policy::ReplicaRouterKind::round_robin;
  SloTargets slo;
  std::string requests_csv_path;  // "" = none
  std::string timeline_path;      // "" = none
  // adaptive_threshold's refits (threshold_trajectory.csv); "" = none
  std::string threshold_trajectory_path;
  double timeline_max_mb = 256;
  // Called with every executed iteration, in start order per replica (validation compares them
  // with the engine's steps one by one).
  std::function<void(const IterationRecord&)> iteration_observer;
  // Called with every executed iteration's full trace at its completion, with its replica
  // (the conformance suite compares them with the engine's steps).
  StepObserver step_observer;
  // Called with every finished request (RequestRecord), in completion order.
  std::function<void(const RequestRecord&)> request_observer;
  // Steady decode steps (policy::steady_decode: nobody waits, the same sequences decode again)
  // reuse the last step's rows instead of asking the scheduler and planning anew. The outputs
  // are the same either way; tests turn it off to prove that.
  bool reuse_steady_decode_steps = true;
};

// The simulation a scenario describes (outputs go under `output_dir`, "" = write no files).
SimulationConfig simulation_config_from(const scenario::Scenario& scenario,
                                        const std::string& output_dir);

// Counters that let tests and debug checks verify conservation: every arrived request finishes,
// every expected output token is emitted, and no KV block is left allocated.
struct SimulationTotals {
  std::int64_t events = 0;
  std::int64_t requests_arrived = 0;
  std::int64_t requests_finished = 0;
  std::int64_t requests_rejected = 0;  // unservable, rejected at arrival (not in requests_arrived)
  std::int64_t tokens_expected = 0;
  std::int64_t tokens_emitted = 0;
  std::int64_t kv_blocks_leaked = 0;
  std::int64_t max_kv_blocks_used = 0;   // peak over replicas of blocks in use
  std::int64_t steady_decode_steps = 0;  // iterations that reused the previous step's rows
  // Time average of the number of requests in the system (arrived, not finished) between the
  // first arrival and the last completion, integrated event by event; with the throughput and
  // mean E2E it checks Little's law.
  double mean_requests_in_system = 0;
  TimeNs end_time = 0;
};

struct SimulationResult {
  MetricsSummary summary;
  SimulationTotals totals;
};

struct Progress {
  std::int64_t requests_finished = 0;
  TimeNs now = 0;
};
using ProgressCallback = std::function<void(const Progress&)>;

// Runs the discrete-event simulation of the cluster over `workload` (pulled one request at a
// time, so memory does not grow with the number of requests). Throws InputError for
// impossible configurations: a request that can never fit a replica's KV memory or token
// budget, or a scheduler that stalls with work left.
SimulationResult simulate(const SimulationConfig& config, traces::RequestSource& workload,
                          const ProgressCallback& progress = {});

}  // namespace exitsim::sim
