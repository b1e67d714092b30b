// Whole-simulator checks against queueing theory and conservation laws.
#include "exitsim/sim/simulator.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::sim {
namespace {

scenario::Scenario scenario_with(std::vector<std::string> overrides) {
  return scenario::load_default_scenario(overrides);
}

SimulationResult run(const scenario::Scenario& s) {
  const auto workload = make_workload(s.workload, s.seed);
  return simulate(simulation_config_from(s, ""), *workload);
}

void expect_conserved(const SimulationResult& r) {
  EXPECT_EQ(r.totals.requests_finished, r.totals.requests_arrived);
  EXPECT_EQ(r.totals.tokens_emitted, r.totals.tokens_expected);
  EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
  EXPECT_EQ(r.summary.requests, r.totals.requests_arrived);
}

// One request at a time, each a fixed 512-token prompt producing one token: an M/D/1 queue
// whose deterministic service time is the roofline cost of that prefill.
std::vector<std::string> md1_overrides(double rate, int requests) {
  return {"scheduler.max_running=1",
          "workload.requests=" + std::to_string(requests),
          "workload.arrivals.rate=" + std::to_string(rate),
          "workload.input_tokens={dist: fixed, value: 512}",
          "workload.output_tokens={dist: fixed, value: 1}",
          "slo.tpot_ms=null"};
}

double service_seconds(const scenario::Scenario& s) {
  const auto cost = make_cost_model(s.cost_model, s.model.shape, s.hardware.spec);
  const BatchEntry prefill{512, 0, s.model.shape.depth.stacked_depth(), true};
  return to_seconds(cost->iteration_cost({&prefill, 1}).total);
}

TEST(Simulator, SingleServerQueueMatchesPollaczekKhinchine) {
  const double service = service_seconds(scenario_with({}));
  const double utilization = 0.5;
  const double rate = utilization / service;
  const SimulationResult r = run(scenario_with(md1_overrides(rate, 200'000)));
  expect_conserved(r);
  // M/D/1: mean wait in queue = rho * D / (2 (1 - rho)).
  const double expected_wait_ms = utilization * service / (2 * (1 - utilization)) * 1e3;
  EXPECT_NEAR(r.summary.queueing.mean / expected_wait_ms, 1.0, 0.03)
      << "service " << service * 1e3 << " ms, mean wait " << r.summary.queueing.mean << " ms";
  // Every request's time in service is exactly D.
  EXPECT_NEAR(r.summary.e2e.mean - r.summary.queueing.mean, service * 1e3, 1e-3);
}

TEST(Simulator, LittlesLawHolds) {
  const double service = service_seconds(scenario_with({}));
  const SimulationResult r = run(scenario_with(md1_overrides(0.7 / service, 50'000)));
  const double arrival_rate = r.summary.request_throughput_per_s;
  const double mean_sojourn_s = r.summary.e2e.mean / 1e3;
  EXPECT_NEAR(r.totals.mean_requests_in_system / (arrival_rate * mean_sojourn_s), 1.0, 0.01);
}

TEST(Simulator, ThroughputSaturatesAtTheServiceRate) {
  const double service = service_seconds(scenario_with({}));
  const SimulationResult r = run(scenario_with(md1_overrides(3.0 / service, 20'000)));
  expect_conserved(r);
  EXPECT_NEAR(r.summary.request_throughput_per_s * service, 1.0, 0.01);
}

TEST(Simulator, LatencyGrowsWithArrivalRate) {
  double previous_e2e = 0;
  for (double rate : {2.0, 8.0, 16.0, 24.0}) {
    const SimulationResult r = run(scenario_with(
        {"workload.requests=1500", "workload.arrivals.rate=" + std::to_string(rate)}));
    expect_conserved(r);
    EXPECT_GT(r.summary.e2e.mean, previous_e2e) << "rate " << rate;
    previous_e2e = r.summary.e2e.mean;
  }
}

TEST(Simulator, TightKvMemoryPreemptsAndNeverLeaks) {
  for (const char* scheduler : {"continuous", "chunked_prefill", "static"}) {
    const SimulationResult r =
        run(scenario_with({"workload.requests=600", "workload.arrivals.rate=20",
                           "workload.input_tokens.max=4096", "workload.output_tokens.max=1024",
                           "scheduler.kind=" + std::string(scheduler), "scheduler.kv_blocks=400"}));
    expect_conserved(r);
    EXPECT_GT(r.summary.preemptions, 0) << scheduler;
    EXPECT_LE(r.totals.max_kv_blocks_used, 400) << scheduler;
  }
}

TEST(Simulator, EverySchedulerConservesRequestsAndTokens) {
  for (const char* scheduler :
       {"static", "continuous", "chunked_prefill", "shortest_prompt_first"}) {
    for (const char* replicas : {"1", "3"}) {
      const SimulationResult r = run(scenario_with(
          {"workload.requests=400", "workload.arrivals.rate=12",
           "cluster.replicas=" + std::string(replicas), "scheduler.kind=" + std::string(scheduler),
           "cluster.router=shortest_queue_tokens"}));
      expect_conserved(r);
    }
  }
}

TEST(Simulator, SameScenarioAndSeedGiveIdenticalSummaries) {
  const auto s = scenario_with({"workload.requests=500", "cluster.replicas=2"});
  EXPECT_EQ(summary_to_json(run(s).summary), summary_to_json(run(s).summary));
  const auto other_seed = scenario_with({"workload.requests=500", "cluster.replicas=2", "seed=7"});
  EXPECT_NE(summary_to_json(run(s).summary), summary_to_json(run(other_seed).summary));
}

std::string error_of(const scenario::Scenario& s) {
  try {
    run(s);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Simulator, RequestLongerThanKvCapacityIsAnError) {
  EXPECT_EQ(error_of(scenario_with({"workload.requests=5", "scheduler.kv_blocks=10",
                                    "workload.input_tokens={dist: fixed, value: 200}",
                                    "workload.output_tokens={dist: fixed, value: 10}"})),
            "workload: request 0 needs K/V for 210 tokens (200 input + 10 output) but replica 0 "
            "(llama-3-8b on h100-sxm) holds 160 tokens (10 blocks of 16); raise "
            "scheduler.kv_blocks or use a larger accelerator");
}

TEST(Simulator, PromptOverTheTokenBudgetRunsAloneRatherThanStalling) {
  for (const char* scheduler : {"continuous", "static", "chunked_prefill"}) {
    const SimulationResult r = run(scenario_with(
        {"workload.requests=40", "workload.arrivals.rate=50", "scheduler.max_batched_tokens=256",
         "scheduler.kind=" + std::string(scheduler),
         "workload.input_tokens={dist: fixed, value: 300}"}));
    expect_conserved(r);
  }
}

TEST(Simulator, PreemptedSequenceWhoseRecomputeOutgrewTheBudgetStillFinishes) {
  // 300-token prompts with 400 outputs under a 512-token budget and 80 KV blocks: preempted
  // sequences must recompute more than the budget (the prompt plus their outputs so far).
  const SimulationResult r = run(scenario_with(
      {"workload.requests=20", "workload.arrivals.rate=1000", "scheduler.max_batched_tokens=512",
       "scheduler.kv_blocks=80", "workload.input_tokens={dist: fixed, value: 300}",
       "workload.output_tokens={dist: fixed, value: 400}"}));
  expect_conserved(r);
  EXPECT_GT(r.summary.preemptions, 0);
}

TEST(Simulator, ModelLargerThanDeviceMemoryIsAnError) {
  EXPECT_EQ(
      error_of(scenario_with({"hardware.preset=a100-40gb", "model.dtype=fp32",
                              "scheduler.memory_reserve_fraction=0.3", "workload.requests=5"})),
      "model: llama-3-8b needs 29.92 GiB of weights plus a 12.00 GiB reserve, but a100-40gb "
      "has 40.00 GiB: no room for KV cache (use a larger accelerator, a smaller dtype, or lower "
      "scheduler.memory_reserve_fraction)");
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {

std::string scenario_error(std::vector<std::string> overrides) {
  try {
    scenario::load_default_scenario(overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Simulator, ImpossibleClusterSettingsAreRejectedBeforeTheRun) {
  EXPECT_EQ(scenario_error({"cluster.replicas=0"}),
            "--set: cluster.replicas: expected an integer in [1, 100000], found 0");
  EXPECT_EQ(scenario_error({"slo.ttft=100"}),
            "--set: slo.ttft: unknown key \"ttft\"; did you mean \"ttft_ms\"?");
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {}  // namespace
}  // namespace exitsim::sim
