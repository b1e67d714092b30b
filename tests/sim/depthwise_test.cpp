// Continuous depth-wise batching in the simulator: one shared-block call per step over tokens at
// mixed recursion indices, against exact step counts, the full-depth run it must reduce to, the
// orderings it must show against sequence-wise strategies, and its K/V accounting.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/block_occupancy.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

// `batch` requests arriving together with fixed lengths under static batching.
SimulationResult run_batch(int batch, std::vector<std::string> overrides,
                           std::int64_t output_tokens = 200, std::int64_t prompt_tokens = 64) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < batch; ++i) {
    requests.push_back(
        {RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, prompt_tokens, output_tokens});
  }
  test_support::VectorSource source(requests);
  overrides.push_back("scheduler.kind=static");
  overrides.push_back("scheduler.max_running=" + std::to_string(batch));
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source);
}

// MoR on SmolLM-360M with three recursions (exit depths 11, 21, 31), exits uniform.
std::vector<std::string> mor3_uniform(const std::string& strategy,
                                      const std::string& preset = "mor-smollm-360m-r3") {
  return {"model.preset=" + preset, "exit_policy.kind=distribution",
          "exit_policy.probabilities=[0.3333333333333333, 0.3333333333333333, "
          "0.3333333333333334]",
          "sync.strategy=" + strategy};
}

double tokens_per_second(const SimulationResult& r) {
  return static_cast<double>(r.totals.tokens_emitted) / static_cast<double>(r.summary.makespan);
}

TEST(Depthwise, OneSequenceTakesOneStepPerRecursionItsTokensRun) {
  const SimulationResult r = run_batch(1, mor3_uniform("depthwise"));
  const auto& exits = r.summary.depth.exit_depth_tokens;
  // The prefill iteration emits the first token at full depth; every later token takes one step
  // per recursion it runs (a lone sequence never waits for another).
  const std::int64_t steps = exits.at(11) * 1 + exits.at(21) * 2 + (exits.at(31) - 1) * 3;
  EXPECT_EQ(r.summary.iterations, 1 + steps);
  EXPECT_EQ(r.totals.tokens_emitted, 200);
  EXPECT_GT(exits.at(11), 40);
  EXPECT_GT(exits.at(21), 40);
}

TEST(Depthwise, WithoutExitsItEmitsWhatFullDepthEmitsInAboutTheSameTime) {
  const SimulationResult full = run_batch(6, {"model.preset=rrt-gemma-1b"});
  const SimulationResult depthwise =
      run_batch(6, {"model.preset=rrt-gemma-1b", "sync.strategy=depthwise"});
  EXPECT_EQ(depthwise.totals.tokens_emitted, full.totals.tokens_emitted);
  EXPECT_DOUBLE_EQ(depthwise.summary.depth.mean_exit_depth, 18.0);
  EXPECT_EQ(depthwise.totals.max_kv_blocks_used, full.totals.max_kv_blocks_used);
  // Sequences in lock step: two block steps per token instead of one iteration of both
  // recursions, the same layers; only per-step launch overheads differ.
  EXPECT_EQ(depthwise.summary.iterations, 1 + 2 * (full.summary.iterations - 1));
  EXPECT_NEAR(
      static_cast<double>(depthwise.summary.makespan) / static_cast<double>(full.summary.makespan),
      1.0, 0.01);
}

TEST(Depthwise, BeatsCompactionWhichBeatsBatchSyncWhenMemoryBound) {
  // Batch 64 decode on an H100 is memory-bound: a layer costs about the same for 1 token or 64
  // apart from the K/V it reads (SmolLM-1.7B has full multi-head K/V, 1024-token prompts).
  // Sequence-wise, with 64 tokens some token almost always runs all three recursions, so every
  // iteration does; compaction saves only the attention reads of the tokens that left (measured:
  // 5-8% over batch_sync). Depth-wise, one block call per step advances every token by one
  // recursion (11% over skip_kv, the best compaction; prefill time is included in both).
  const auto run = [](const char* strategy) {
    return tokens_per_second(
        run_batch(64, mor3_uniform(strategy, "mor-smollm-1.7b-r3"), 300, 1024));
  };
  const double depthwise = run("depthwise");
  const double skip_kv = run("skip_kv");
  const double deferred_fill = run("deferred_fill");
  const double state_copy = run("state_copy");
  const double batch_sync = run("batch_sync");
  for (const double compaction : {skip_kv, deferred_fill, state_copy}) {
    EXPECT_GT(depthwise, 1.05 * compaction);
    EXPECT_GT(compaction, batch_sync);
  }
}

TEST(Depthwise, AccumulatingToOneIsImmediate) {
  const auto immediate = run_batch(8, mor3_uniform("depthwise"));
  std::vector<std::string> accumulate = mor3_uniform("depthwise");
  accumulate.push_back("sync.exited_tokens=accumulate");
  accumulate.push_back("sync.accumulate_threshold=1");
  EXPECT_EQ(summary_to_json(run_batch(8, accumulate).summary), summary_to_json(immediate.summary));
}

TEST(Depthwise, AccumulatedTokensWaitForTheHeadAndAllArrive) {
  std::vector<std::string> accumulate = mor3_uniform("depthwise");
  accumulate.push_back("sync.exited_tokens=accumulate");
  accumulate.push_back("sync.accumulate_threshold=6");
  const auto immediate = run_batch(8, mor3_uniform("depthwise"));
  const auto held = run_batch(8, accumulate);
  EXPECT_EQ(held.totals.tokens_emitted, 8 * 200);
  EXPECT_EQ(held.totals.requests_finished, 8);
  EXPECT_EQ(held.totals.kv_blocks_leaked, 0);
  // Waiting for the head leaves slots idle: more steps for the same tokens.
  EXPECT_GT(held.summary.iterations, immediate.summary.iterations);
}

TEST(Depthwise, ExitedTokensKeepNoDeeperKvAsUnderSkipKv) {
  const std::vector<std::string> uniform = {"model.preset=rrt-gemma-1b",
                                            "exit_policy.kind=distribution",
                                            "exit_policy.probabilities=[0.5, 0.5]"};
  std::vector<std::string> depthwise = uniform;
  depthwise.push_back("sync.strategy=depthwise");
  const auto full = run_batch(1, {"model.preset=rrt-gemma-1b"}, 4000);
  const auto dw = run_batch(1, depthwise, 4000);
  const double ratio = static_cast<double>(dw.totals.max_kv_blocks_used) /
                       static_cast<double>(full.totals.max_kv_blocks_used);
  EXPECT_NEAR(ratio, 0.75, 0.02);
}

TEST(Depthwise, ServesAnOverloadedReplicaWithPreemptionsAndNoLeaks) {
  auto s = scenario::load_default_scenario(std::vector<std::string>{
      "model.preset=mor-smollm-360m-r3", "exit_policy.kind=distribution",
      "exit_policy.probabilities=[0.5, 0.3, 0.2]", "sync.strategy=depthwise",
      "workload.requests=300", "workload.arrivals.rate=200", "scheduler.kv_blocks=1500",
      "workload.input_tokens.max=1536", "workload.output_tokens.max=512"});
  const auto workload = make_workload(s.workload, s.seed);
  const SimulationResult r = simulate(simulation_config_from(s, ""), *workload);
  EXPECT_EQ(r.totals.requests_finished, 300);
  EXPECT_EQ(r.totals.tokens_emitted, r.totals.tokens_expected);
  EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
  EXPECT_GT(r.summary.preemptions, 0);
}

TEST(Depthwise, SameSeedSameRun) {
  const auto a = run_batch(8, mor3_uniform("depthwise"));
  const auto b = run_batch(8, mor3_uniform("depthwise"));
  EXPECT_EQ(summary_to_json(a.summary), summary_to_json(b.summary));
}

TEST(Depthwise, ExitPointsInsideARecursionAreRefused) {
  try {
    run_batch(1, {"model.preset=rrt-gemma-1b", "model.depth.exit_points=[5, 18]",
                  "sync.strategy=depthwise"});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "model.depth.exit_points: expected exit points at ends of recursions (0 prelude "
                 "+ a multiple of 9 block layers) for depthwise batching, found 5");
  }
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {

// 64 requests at once on a replica that runs 16 sequences (continuous batching, so a freed slot
// is refilled from the queue at once), exits uniform over MoR-360M's three recursions. Counts the
// block's largest step from the trace rows (support/block_occupancy.hpp).
struct QueueRun {
  SimulationResult result;
  std::int64_t most_in_block = 0;
};

QueueRun run_queue(std::vector<std::string> overrides) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < 64; ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 64, 200});
  test_support::VectorSource source(requests);
  overrides.insert(overrides.end(), {"scheduler.kind=continuous", "scheduler.max_running=16"});
  SimulationConfig config = simulation_config_from(scenario::load_default_scenario(overrides), "");
  QueueRun out;
  config.step_observer = [&](int, const policy::StepTrace& step) {
    out.most_in_block = std::max(out.most_in_block, test_support::block_occupancy(step));
  };
  out.result = simulate(config, source);
  return out;
}

// Issues 21 (point 4) and 45 (point 2). With exited tokens accumulating for a shared head call of
// 16 (the batch limit), each keeps its sequence's slot while it waits, so the block drains as
// tokens exit: 5,920 tokens/s against 5,853 for the same model at full depth and 7,032 with an
// immediate head. In a head queue a token that left gives its slot to the next sequence at once,
// and once its head ran its sequence queues behind the waiting ones to be admitted again: the
// block still holds 16 sequences at most in every step, and the run makes 8,121 tokens/s, 1.37x
// the accumulating one (21.7 rows per step, the rest head-queue tokens). Before issue 45 the
// returning sequences took their slot back unchecked and the gain was 1.52x.
TEST(DepthwiseHeadQueue, ExitedTokensThatLeaveTheirSlotWaitBehindTheQueue) {
  const auto full = run_queue({"model.preset=mor-smollm-360m-r3"}).result;
  const auto immediate = run_queue(mor3_uniform("depthwise")).result;
  std::vector<std::string> accumulate = mor3_uniform("depthwise");
  accumulate.insert(accumulate.end(),
                    {"sync.exited_tokens=accumulate", "sync.accumulate_threshold=16"});
  std::vector<std::string> queue = mor3_uniform("depthwise");
  queue.insert(queue.end(), {"sync.exited_tokens=head_queue", "sync.accumulate_threshold=16"});
  const QueueRun held = run_queue(accumulate);
  const QueueRun parked = run_queue(queue);
  EXPECT_LT(tokens_per_second(held.result), 1.05 * tokens_per_second(full));
  EXPECT_LT(tokens_per_second(held.result), tokens_per_second(immediate));
  EXPECT_EQ(held.most_in_block, 16);
  EXPECT_EQ(parked.most_in_block, 16);
  EXPECT_GT(tokens_per_second(parked.result), 1.3 * tokens_per_second(held.result));
  EXPECT_LE(held.result.summary.mean_batch_size, 16.0);
  // Rows per step count the head queue's tokens too, which hold no slot.
  EXPECT_GT(parked.result.summary.mean_batch_size, 16.0);
  for (const SimulationResult* r : {&held.result, &parked.result}) {
    EXPECT_EQ(r->totals.tokens_emitted, r->totals.tokens_expected);
    EXPECT_EQ(r->totals.kv_blocks_leaked, 0);
  }
}

}  // namespace
}  // namespace exitsim::sim
