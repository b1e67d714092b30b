// Simulator speed on the replay the README quotes: the whole Azure conversation trace (19,366
// requests, ~58 min of traffic) on one Llama-3-8B / H100 replica with continuous batching.
// Baseline in the same run: reading the same trace without simulating it.
//
//   build/release/bin/simulator_bench --benchmark_filter=azure
//
// Counters: requests/s and events/s of wall time, simulated output tokens/s, and
// `x_real_time` = simulated span / wall time.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/request_trace.hpp"

namespace {

const std::string k_azure = std::string(EXITSIM_SHARED_TRACES_DIR) + "/azure_llm_2023_conv.csv";

// The default scenario (Llama-3-8B on one H100) replaying the trace. The token budget admits
// the trace's longest prompt (14,050 tokens) in one piece.
exitsim::scenario::Scenario azure_scenario(const std::string& scheduler) {
  const std::string yaml = "workload: {source: trace, requests: 0, trace: {path: '" + k_azure +
                           "'}}\nscheduler: {kind: " + scheduler + ", max_batched_tokens: 16384}\n";
  return exitsim::scenario::load_scenario_text(yaml, "simulator_bench");
}

void BM_read_azure_trace(benchmark::State& state) {
  if (!std::filesystem::exists(k_azure)) {
    state.SkipWithError("trace absent (../shared/traces)");
    return;
  }
  std::int64_t requests = 0;
  for (auto _ : state) {
    const auto source = exitsim::traces::open_request_trace(k_azure);
    requests = 0;
    while (source->next())
      ++requests;
  }
  state.counters["requests/s"] = benchmark::Counter(static_cast<double>(requests),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void simulate_azure(benchmark::State& state, const std::string& scheduler) {
  if (!std::filesystem::exists(k_azure)) {
    state.SkipWithError("trace absent (../shared/traces)");
    return;
  }
  const auto scenario = azure_scenario(scheduler);
  const auto config = exitsim::sim::simulation_config_from(scenario, "");
  exitsim::sim::SimulationResult result;
  for (auto _ : state) {
    const auto workload = exitsim::sim::make_workload(scenario.workload, scenario.seed);
    result = exitsim::sim::simulate(config, *workload);
  }
  using benchmark::Counter;
  state.counters["requests/s"] = Counter(static_cast<double>(result.totals.requests_finished),
                                         Counter::kIsIterationInvariantRate);
  state.counters["events/s"] =
      Counter(static_cast<double>(result.totals.events), Counter::kIsIterationInvariantRate);
  state.counters["sim_tokens/s"] = Counter(static_cast<double>(result.totals.tokens_emitted),
                                           Counter::kIsIterationInvariantRate);
  state.counters["x_real_time"] =
      Counter(exitsim::to_seconds(result.totals.end_time), Counter::kIsIterationInvariantRate);
  state.counters["iterations"] = static_cast<double>(result.summary.iterations);
}

BENCHMARK(BM_read_azure_trace)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(simulate_azure, continuous, std::string("continuous"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(simulate_azure, chunked_prefill, std::string("chunked_prefill"))
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
