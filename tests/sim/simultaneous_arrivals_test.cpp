// Requests that arrive at the same instant are batched together, and the KV-usage series drops
// when sequences finish rather than holding their blocks forever.
#include <gtest/gtest.h>

#include <cmath>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

TEST(SimultaneousArrivals, AreAdmittedInOneIteration) {
  std::vector<RequestDescriptor> requests;
  for (std::uint64_t i = 0; i < 8; ++i)
    requests.push_back({RequestId(i), TimeNs{0}, 128, 64});
  test_support::VectorSource source(requests);
  const auto s = scenario::load_default_scenario(std::vector<std::string>{"scheduler.kind=static"});
  const SimulationResult r = simulate(simulation_config_from(s, ""), source);
  // One prefill of all eight, then 63 decode steps of all eight.
  EXPECT_EQ(r.summary.iterations, 64);
  EXPECT_DOUBLE_EQ(r.summary.mean_batch_size, 8.0);
}

TEST(SimultaneousArrivals, KvUsageFallsToZeroOnceEverythingFinished) {
  std::vector<RequestDescriptor> requests = {{RequestId(0), TimeNs{0}, 4000, 2},
                                             {RequestId(1), TimeNs{0}, 16, 3000}};
  test_support::VectorSource source(requests);
  const auto s = scenario::load_default_scenario(
      std::vector<std::string>{"cluster.replicas=2", "scheduler.kv_blocks=1000"});
  const SimulationResult r = simulate(simulation_config_from(s, ""), source);
  ASSERT_GE(r.summary.series.size(), 3u);
  // Replica 0 holds 4000 tokens (251 blocks) for a fraction of a second only; by the last window
  // only replica 1's ~190 blocks remain, averaged over two replicas.
  const double last = r.summary.series.back().kv_usage;
  EXPECT_LT(last, 0.11);
  EXPECT_GT(last, 0.08);
}

}  // namespace
}  // namespace exitsim::sim
