// Issue 45 point 2, in the simulator: whatever the exited-token mode (and either place a head
// queue's sequences return to, behind or ahead of the waiting requests), the shared block of a
// depth-wise replica never runs more sequences in one step than scheduler.max_running, over
// random batch limits, exit distributions, arrivals, schedulers and K/V budgets. The oracle counts
// each step's block from its trace rows (support/block_occupancy.hpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "support/block_occupancy.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

struct RunOutcome {
  std::int64_t batch_limit = 0;
  std::int64_t most_in_block = 0;  // the oracle's largest step
  std::int64_t steps = 0;
  SimulationTotals totals;
};

// One random depth-wise run of MoR-SmolLM-360M (three recursions) drawn from `seed`: the batch
// limit, the exit distribution, the accumulate threshold, the scheduler, the K/V budget (every
// third run tight enough to preempt) and the arrivals (all at 0, or Poisson).
RunOutcome random_run(const std::string& exited, std::uint64_t seed) {
  RandomStream draw(seed, "depthwise_occupancy." + exited);
  RunOutcome out;
  out.batch_limit = draw.uniform_int(2, 16);
  const double a = draw.uniform_positive();
  const double b = draw.uniform_positive();
  const double c = draw.uniform_positive();
  // Exact to the last digit: the scenario wants them to sum to 1.
  const std::string probabilities =
      fmt::format("[{}, {}, {}]", a / (a + b + c), b / (a + b + c), c / (a + b + c));
  std::vector<std::string> overrides = {
      "model.preset=mor-smollm-360m-r3",
      "exit_policy.kind=distribution",
      "exit_policy.probabilities=" + probabilities,
      "sync.strategy=depthwise",
      "sync.exited_tokens=" + (exited == "head_queue_ahead" ? std::string("head_queue") : exited),
      "scheduler.kind=" + std::string(draw.uniform() < 0.5 ? "continuous" : "chunked_prefill"),
      "scheduler.max_batched_tokens=512",
      "scheduler.max_running=" + std::to_string(out.batch_limit),
      "scheduler.unservable=reject",
      "seed=" + std::to_string(seed)};
  const std::int64_t threshold = draw.uniform_int(1, out.batch_limit);
  if (exited != "immediate")
    overrides.push_back("sync.accumulate_threshold=" + std::to_string(threshold));
  if (exited == "head_queue_ahead")
    overrides.push_back("sync.head_queue_returns=ahead_of_waiting");
  if (seed % 3 == 0)
    overrides.push_back("scheduler.kv_blocks=" + std::to_string(draw.uniform_int(12, 60)));
  const bool together = draw.uniform() < 0.5;
  std::vector<RequestDescriptor> requests;
  TimeNs t = 0;
  const std::int64_t count = draw.uniform_int(20, 60);
  for (std::int64_t i = 0; i < count; ++i) {
    if (!together)
      t += static_cast<TimeNs>(draw.exponential(1.0 / 2'000'000.0));  // mean gap 2 ms
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), t, draw.uniform_int(1, 64),
                        draw.uniform_int(2, 40)});
  }
  test_support::VectorSource source(requests);
  SimulationConfig config = simulation_config_from(scenario::load_default_scenario(overrides), "");
  config.step_observer = [&](int, const policy::StepTrace& step) {
    out.most_in_block = std::max(out.most_in_block, test_support::block_occupancy(step));
    out.steps += 1;
    EXPECT_LE(test_support::block_occupancy(step), out.batch_limit)
        << exited << " seed " << seed << " step " << step.step;
  };
  out.totals = simulate(config, source).totals;
  return out;
}

class DepthwiseOccupancy : public testing::TestWithParam<std::string> {};

TEST_P(DepthwiseOccupancy, TheBlockNeverRunsMoreThanMaxRunningSequences) {
  int full_runs = 0;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const RunOutcome run = random_run(GetParam(), seed);
    EXPECT_GT(run.steps, 0);
    // Every accepted request ran to its end, and every block came back (the runs with a tight
    // budget preempt; under head_queue they release waiting sequences' K/V too).
    EXPECT_EQ(run.totals.tokens_emitted, run.totals.tokens_expected) << "seed " << seed;
    EXPECT_EQ(run.totals.kv_blocks_leaked, 0) << "seed " << seed;
    full_runs += run.most_in_block == run.batch_limit ? 1 : 0;
  }
  // Not vacuous: the bound is reached, the block filled to its limit, in most runs.
  EXPECT_GE(full_runs, 20);
}

INSTANTIATE_TEST_SUITE_P(ExitedTokens, DepthwiseOccupancy,
                         testing::Values("immediate", "accumulate", "head_queue",
                                         "head_queue_ahead"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace exitsim::sim
