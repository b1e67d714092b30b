// The K/V a strategy does not store turns into batch, under memory pressure: the scheduler asks
// for the blocks the executor's rows need (policy::kv_footprint), not for every layer of every
// token. Each test runs where the K/V budget binds (it preempts at full depth).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

// Recursive Gemma (two recursions of 9 layers, no prelude or coda), half the decoded tokens
// exiting after the first recursion.
std::vector<std::string> rrt_uniform(const std::string& strategy) {
  return {"model.preset=rrt-gemma-1b", "exit_policy.kind=distribution",
          "exit_policy.probabilities=[0.5, 0.5]", "sync.strategy=" + strategy};
}

// `count` requests of 64 prompt and `output` output tokens arriving together on continuous
// batching with `kv_blocks` blocks of 16 tokens.
SimulationResult run_together(std::vector<std::string> overrides, int count, std::int64_t output,
                              std::int64_t kv_blocks) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < count; ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 64, output});
  test_support::VectorSource source(requests);
  overrides.push_back("scheduler.kind=continuous");
  overrides.push_back("scheduler.max_running=64");
  overrides.push_back("scheduler.kv_blocks=" + std::to_string(kv_blocks));
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source);
}

// Eight sequences of 1064 tokens need 8 x 67 = 536 blocks at full depth; with half the decode
// tokens keeping no second-recursion K/V they need about (67 + 36) / 2 = 52 each, 412 in all.
// 480 blocks sit between the two.
constexpr std::int64_t k_between = 480;

TEST(KvPressure, SkipKvSustainsTheBatchItsKvBudgetAllows) {
  const auto full = run_together(rrt_uniform("state_copy"), 8, 1000, k_between);
  const auto skip = run_together(rrt_uniform("skip_kv"), 8, 1000, k_between);
  const auto depthwise = run_together(rrt_uniform("depthwise"), 8, 1000, k_between);
  EXPECT_GT(full.summary.preemptions, 0) << "the budget must bind at full K/V";
  EXPECT_EQ(skip.summary.preemptions, 0);
  EXPECT_EQ(depthwise.summary.preemptions, 0);
  for (const SimulationResult* r : {&full, &skip, &depthwise}) {
    EXPECT_EQ(r->totals.tokens_emitted, 8 * 1000);
    EXPECT_EQ(r->totals.kv_blocks_leaked, 0);
  }
  // What it held is what its rows need: about three quarters of full depth's 536.
  EXPECT_LE(skip.totals.max_kv_blocks_used, k_between);
  EXPECT_NEAR(static_cast<double>(skip.totals.max_kv_blocks_used), 412.0, 16.0);
}

TEST(KvPressure, StrategiesThatStoreLessRunMoreSequencesAndMoreTokens) {
  // A stream of requests that keeps the replica memory-bound (the reproducer, smaller).
  const auto run = [](const std::string& strategy) {
    std::vector<std::string> o = rrt_uniform(strategy);
    for (const char* extra :
         {"scheduler.kv_blocks=3000", "workload.requests=400", "workload.arrivals.rate=50",
          "workload.input_tokens={dist: fixed, value: 1024}",
          "workload.output_tokens={dist: fixed, value: 512}"}) {
      o.emplace_back(extra);
    }
    const auto s = scenario::load_default_scenario(o);
    const auto workload = make_workload(s.workload, s.seed);
    return simulate(simulation_config_from(s, ""), *workload);
  };
  const auto full = run("full_depth");
  const auto skip = run("skip_kv");
  const auto depthwise = run("depthwise");
  EXPECT_GT(full.summary.preemptions, 0) << "the budget must bind at full depth";
  EXPECT_LT(skip.summary.preemptions, full.summary.preemptions);
  EXPECT_LT(depthwise.summary.preemptions, full.summary.preemptions);
  EXPECT_GT(skip.summary.mean_batch_size, full.summary.mean_batch_size);
  EXPECT_GT(skip.summary.throughput_tokens_per_s, full.summary.throughput_tokens_per_s);
  EXPECT_GE(depthwise.summary.throughput_tokens_per_s, skip.summary.throughput_tokens_per_s);
}

TEST(KvPressure, SharedKvHoldsOneRecursionSoTwiceTheSequencesFitInTheSameMemory) {
  // Blocks derived from memory: 40 GB with 90% held back leaves 1.2 GB beside the weights.
  const std::vector<std::string> memory = {"model.preset=rrt-gemma-1b", "hardware.preset=a100-40gb",
                                           "scheduler.memory_reserve_fraction=0.9",
                                           "scheduler.kind=continuous",
                                           "scheduler.max_running=256"};
  std::vector<std::string> shared = memory;
  shared.push_back("sync.strategy=shared_kv");
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < 160; ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 512, 512});
  test_support::VectorSource a(requests), b(requests);
  const auto full =
      simulate(simulation_config_from(scenario::load_default_scenario(memory), ""), a);
  const auto one = simulate(simulation_config_from(scenario::load_default_scenario(shared), ""), b);
  ASSERT_GT(full.summary.preemptions, 0) << "the budget must bind at full K/V";
  // Two recursions, no prelude or coda: a block stores half the layers, so the same memory
  // holds twice the blocks (4,284 and 8,568 here), and both fill it.
  EXPECT_GT(static_cast<double>(one.totals.max_kv_blocks_used),
            1.9 * static_cast<double>(full.totals.max_kv_blocks_used));
  // Measured 117 against 79 sequences per iteration (the drain at the end runs small batches).
  EXPECT_GT(one.summary.mean_batch_size, 1.3 * full.summary.mean_batch_size);
  EXPECT_LT(one.summary.preemptions, full.summary.preemptions);
}

}  // namespace
}  // namespace exitsim::sim
