// Swap preemption (scheduler.preemption: swap): a victim's K/V goes to host memory over the host
// link and comes back when it is readmitted, priced by size; nothing is recomputed, every token
// and block is accounted for, and a full swap space falls back to recompute, saying so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::sim {
namespace {

SimulationResult run(std::vector<std::string> set) {
  // 600 requests at 20/s on 400 K/V blocks: the pool runs out and sequences are preempted.
  set.insert(set.begin(), {"workload.requests=600", "workload.arrivals.rate=20",
                           "workload.input_tokens.max=4096", "workload.output_tokens.max=1024",
                           "scheduler.kv_blocks=400"});
  const auto s = scenario::load_default_scenario(set);
  const auto source = make_workload(s.workload, s.seed);
  return simulate(simulation_config_from(s, ""), *source);
}

void expect_conserved(const SimulationResult& r) {
  EXPECT_EQ(r.totals.requests_finished, r.totals.requests_arrived);
  EXPECT_EQ(r.totals.tokens_emitted, r.totals.tokens_expected);
  EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
}

// Every victim's K/V goes out and comes back whole: the bytes match, no token is recomputed, and
// the transfers take exactly their bytes over PCIe Gen5's 64 GB/s (each iteration's share
// rounded to the nanosecond).
TEST(Swap, ARoundTripConservesTokensAndKvAndIsPricedBySize) {
  const SimulationResult recompute = run({});
  const SimulationResult swapped = run({"scheduler.preemption=swap"});
  expect_conserved(recompute);
  expect_conserved(swapped);
  EXPECT_GT(recompute.summary.recomputed_tokens, 0);
  ASSERT_TRUE(swapped.summary.swap.has_value());
  const SwapSummary& w = *swapped.summary.swap;
  EXPECT_GT(w.swapped_out, 0);
  EXPECT_EQ(w.swapped_out, swapped.summary.preemptions);
  EXPECT_EQ(w.recomputed_instead, 0);
  EXPECT_EQ(swapped.summary.recomputed_tokens, 0);
  EXPECT_EQ(w.swapped_in_bytes, w.swapped_out_bytes);
  const double expected_ns =
      static_cast<double>(w.swapped_out_bytes + w.swapped_in_bytes) / 64e9 * 1e9;
  EXPECT_NEAR(static_cast<double>(w.transfer_time), expected_ns,
              static_cast<double>(swapped.summary.iterations));
  EXPECT_FALSE(recompute.summary.swap.has_value());
}

// A swap space of 1 MiB holds no victim's K/V: every one is recomputed, and the warnings say so.
TEST(Swap, AFullSwapSpaceRecomputesInsteadAndSaysSo) {
  const SimulationResult r = run({"scheduler.preemption=swap", "hardware.host_swap_gb=0.001"});
  expect_conserved(r);
  const SwapSummary& w = *r.summary.swap;
  EXPECT_GT(w.recomputed_instead, 0);
  EXPECT_GT(r.summary.recomputed_tokens, 0);
  bool said = false;
  for (const std::string& line : r.summary.warnings)
    said = said || line.find("hardware.host_swap_gb: ") == 0;
  EXPECT_TRUE(said);
}

TEST(Swap, NeedsAHostLink) {
  try {
    run({"scheduler.preemption=swap", "hardware.host_link_bandwidth_gbps=0"});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "hardware.host_link_bandwidth_gbps: expected a positive host link bandwidth for "
              "scheduler.preemption: swap, found 0");
  }
}

}  // namespace
}  // namespace exitsim::sim
