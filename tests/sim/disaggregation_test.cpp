// Prefill/decode disaggregation (scheduler.role): a prefill replica runs the prompt, the K/V
// travels to a decode replica over the prefill replica's network link, shared by the transfers on
// it, and the first token arrives with it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

constexpr const char* k_split =
    "cluster:\n  groups:\n"
    "    - {count: 1, set: [\"scheduler.role=prefill\"]}\n"
    "    - {count: 1, set: [\"scheduler.role=decode\"]}\n";

SimulationResult run(const std::string& yaml, std::vector<RequestDescriptor> requests) {
  test_support::VectorSource source(std::move(requests));
  const scenario::Scenario s = scenario::load_scenario_text(yaml, "s.yaml");
  return simulate(simulation_config_from(s, ""), source);
}

std::vector<RequestDescriptor> at_once(int count) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < count; ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 1024, 10});
  return requests;
}

// Llama-3-8B's K/V is 128 KiB a token: 1,024 tokens are 134,217,728 bytes, 3,728,270 ns over the
// 0.72 of the H100 preset's 50 GB/s network link a send reaches (hardware.node_link_efficiency),
// after its 20 us send latency (hardware.node_link_latency_us).
constexpr double k_latency_ns = 20000.0;
constexpr double k_bytes_ns = 134217728.0 / (50e9 * 0.72) * 1e9;
constexpr double k_transfer_ns = k_latency_ns + k_bytes_ns;

// One request: TTFT is the prefill (a mixed replica's whole TTFT here), the latency and the
// bytes; nothing queues.
TEST(Disaggregation, OneRequestsTtftIsPrefillPlusTransfer) {
  const SimulationResult mixed = run("", at_once(1));
  const SimulationResult split = run(k_split, at_once(1));
  ASSERT_TRUE(split.summary.transfers.has_value());
  EXPECT_EQ(split.summary.transfers->transfers, 1);
  EXPECT_EQ(split.summary.transfers->bytes, 134217728);
  EXPECT_NEAR(split.summary.ttft.max * 1e6, mixed.summary.ttft.max * 1e6 + k_transfer_ns, 1.0);
  EXPECT_EQ(split.totals.tokens_emitted, 10);
  EXPECT_EQ(split.totals.kv_blocks_leaked, 0);
}

// Two prompts prefilled together leave together and share the link: each takes twice the bytes'
// time (after its own latency).
TEST(Disaggregation, ConcurrentTransfersShareTheLink) {
  const SimulationResult mixed = run("", at_once(2));
  const SimulationResult split = run(k_split, at_once(2));
  EXPECT_EQ(split.summary.transfers->most_concurrent, 2);
  EXPECT_NEAR(split.summary.ttft.max * 1e6,
              mixed.summary.ttft.max * 1e6 + k_latency_ns + 2 * k_bytes_ns, 2.0);
  EXPECT_EQ(split.totals.requests_finished, 2);
}

// A decode replica is not interrupted by prompts: TPOT's tail is shorter than on two mixed
// replicas, at the price of the transfers in TTFT.
TEST(Disaggregation, DecodeReplicasKeepTheirTpotFreeOfPrefills) {
  const std::string load = "workload: {requests: 400, arrivals: {rate: 6}}\n";
  const scenario::Scenario split = scenario::load_scenario_text(load + k_split, "s.yaml");
  const scenario::Scenario mixed =
      scenario::load_scenario_text(load + "cluster: {replicas: 2}\n", "s.yaml");
  const auto run_scenario = [](const scenario::Scenario& s) {
    const auto source = make_workload(s.workload, s.seed);
    return simulate(simulation_config_from(s, ""), *source);
  };
  const SimulationResult a = run_scenario(mixed);
  const SimulationResult b = run_scenario(split);
  EXPECT_LT(b.summary.tpot.p99, a.summary.tpot.p99);
  EXPECT_EQ(b.summary.transfers->transfers, 400);
  EXPECT_EQ(b.totals.tokens_emitted, b.totals.tokens_expected);
  EXPECT_EQ(b.totals.kv_blocks_leaked, 0);
}

// Under skip_kv a decode replica holds the handed-off prompt's rows at every recursion (it ran
// at full depth): one request's peak pool use is the mixed replica's.
TEST(Disaggregation, AHandedOffPromptHoldsEveryRecursionsRows) {
  const std::string model =
      "model: {preset: rrt-gemma-1b}\nexit_policy: {kind: distribution, probabilities: [0.5, "
      "0.5]}\nsync: {strategy: skip_kv}\n";
  std::vector<RequestDescriptor> one = {{RequestId(0), TimeNs{0}, 1024, 60}};
  const SimulationResult mixed = run(model, one);
  const SimulationResult split = run(model + k_split, one);
  EXPECT_EQ(split.totals.max_kv_blocks_used, mixed.totals.max_kv_blocks_used);
  EXPECT_EQ(split.totals.tokens_emitted, 60);
}

// With prefix caching on, a handed-off request (its prompt computed, no blocks named) must not be
// offered a "hit" that resets its computed tokens: the decode replica decodes, it does not prefill
// the prompt again, so the run is the same as without the cache.
TEST(Disaggregation, PrefixCachingLeavesAHandedOffPromptComputed) {
  const SimulationResult plain = run(k_split, at_once(1));
  const SimulationResult cached =
      run(std::string("scheduler: {prefix_caching: true}\n") + k_split, at_once(1));
  EXPECT_EQ(cached.summary.makespan, plain.summary.makespan);
  EXPECT_EQ(cached.summary.iterations, plain.summary.iterations);
}

TEST(Disaggregation, ACleanSplitNeedsBothKinds) {
  try {
    run("cluster:\n  groups:\n    - {count: 2, set: [\"scheduler.role=prefill\"]}\n", at_once(1));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "scheduler.role: expected replicas that run prompts (mixed or prefill) and "
              "replicas that decode (mixed or decode), found prefill replicas only");
  }
}

}  // namespace
}  // namespace exitsim::sim
