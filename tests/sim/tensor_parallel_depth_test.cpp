// Dynamic depth on tensor- and pipeline-parallel replicas (issue 20, point 3): every exit policy
// and synchronization strategy runs on a TP replica, and the system bottleneck of batched early
// exit (a batch runs to its deepest token) reappears under TP for the strategy that has it and not
// for those that do not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

// B requests arriving together with fixed lengths under static batching: every decode iteration
// holds B tokens. Makespan over full depth's is the speedup of the strategy at that batch.
SimulationResult run_batch(int batch, std::vector<std::string> overrides) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < batch; ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 64, 400});
  test_support::VectorSource source(requests);
  overrides.push_back("scheduler.kind=static");
  overrides.push_back("scheduler.max_running=" + std::to_string(batch));
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source);
}

double speedup(int batch, int tensor, const std::string& strategy, int pipeline = 1) {
  const std::vector<std::string> base = {"model.preset=layerskip-llama-2-7b",
                                         "parallel.tensor=" + std::to_string(tensor),
                                         "parallel.pipeline=" + std::to_string(pipeline)};
  std::vector<std::string> dynamic = base;
  dynamic.insert(dynamic.end(), {"exit_policy.kind=distribution",
                                 "exit_policy.probabilities=[0.25, 0.25, 0.25, 0.25]",
                                 "sync.strategy=" + strategy});
  return static_cast<double>(run_batch(batch, base).summary.makespan) /
         static_cast<double>(run_batch(batch, dynamic).summary.makespan);
}

// Exits uniform over LayerSkip's 8, 16, 24 and 32 layers (mean 20). A decode step is bound by
// reading each layer's weights, and under TP by each layer's two all-reduces too; both are paid
// once any token of the batch runs the layer. One sequence gains from every strategy; at 32
// sequences some token almost always runs to layer 32, so the gain is nearly gone whatever the
// strategy: the system bottleneck of batched early exit. What state_copy and deferred_fill keep
// at 32 is what their exited tokens skip: attention and the MLP's activations, most of it decode
// attention's time per sequence and K/V head (the H100 preset's 0.03 us; Llama-2-7B has 32 K/V
// heads: 31 us a layer at 32 sequences; without that term they would keep 4.6% and 3.7%). TP
// splits the weight reads (a quarter each at TP 4) and the K/V heads but not the all-reduces'
// latency, so what they keep shrinks further. Speedups over full depth (makespan), 400 tokens
// per sequence, on H100s:
//                  batch 1: TP 1   TP 4    batch 32: TP 1   TP 4
//   batch_sync              1.610  1.612             1.000  1.000
//   state_copy              1.479  1.535             1.083  1.011
//   deferred_fill           1.623  1.628             1.091  1.008
TEST(TensorParallelDepth, TheBatchedEarlyExitBottleneckReappearsUnderTp) {
  for (const std::string strategy : {"batch_sync", "state_copy", "deferred_fill"}) {
    SCOPED_TRACE(strategy);
    double kept_at_tp1 = 0;
    for (const int tensor : {1, 4}) {
      SCOPED_TRACE(tensor);
      EXPECT_GT(speedup(1, tensor, strategy), 1.4);
      const double kept = speedup(32, tensor, strategy) - 1;
      EXPECT_GE(kept, -0.001);
      EXPECT_LT(kept, 0.1);
      if (tensor == 1) {
        kept_at_tp1 = kept;
      } else if (strategy != "batch_sync") {
        EXPECT_LT(kept, 0.5 * kept_at_tp1);  // TP leaves less of the gain
      }
    }
  }
}

// The recursive strategies on a recursive model (RRT's Gemma 1B: one K/V head, so TP 2
// replicates it) and every exit policy kind the simulator draws itself: each run finishes every
// request at TP 2 with the exits it drew. (Not every one is faster: state_copy's K/V-only layers
// cost more than they save at 8 sequences on this model, 1.0% slower than full depth.)
TEST(TensorParallelDepth, EveryStrategyAndPolicyRunsOnATensorParallelReplica) {
  for (const std::string strategy : {"skip_kv", "shared_kv", "depthwise", "state_copy"}) {
    SCOPED_TRACE(strategy);
    const std::vector<std::string> base = {"model.preset=rrt-gemma-1b", "parallel.tensor=2"};
    std::vector<std::string> dynamic = base;
    dynamic.insert(dynamic.end(),
                   {"exit_policy.kind=distribution", "exit_policy.probabilities=[0.6, 0.4]",
                    "sync.strategy=" + strategy});
    const SimulationResult full = run_batch(8, base);
    const SimulationResult early = run_batch(8, dynamic);
    EXPECT_EQ(early.summary.requests, 8);
    EXPECT_EQ(early.summary.output_tokens, full.summary.output_tokens);
    // 60% exit after the first pass of the shared block (depth 9 of 18).
    EXPECT_NEAR(early.summary.depth.mean_exit_depth, 0.6 * 9 + 0.4 * 18, 0.6);
  }
  for (const std::string policy :
       {"{kind: position_schedule, schedule: [{from_position: 0, depth: 18}, {from_position: 16, "
        "depth: 9}]}",
        "{kind: router_expert_choice, router_scores: uniform}",
        "{kind: router_token_choice, router_scores: uniform}"}) {
    SCOPED_TRACE(policy);
    const SimulationResult r = run_batch(8, {"model.preset=rrt-gemma-1b", "parallel.tensor=2",
                                             "exit_policy=" + policy, "sync.strategy=state_copy"});
    EXPECT_EQ(r.summary.requests, 8);
    EXPECT_LT(r.summary.depth.mean_exit_depth, 18.0);
  }
}

// Under pipeline parallelism (2 stages of 16 layers) a token that exits at layer 8 or 16 frees
// the second stage, but the first runs for every token. One sequence is one micro-batch that
// crosses both stages in turn, so it gains what it gains unsplit. Two sequences fill the
// pipeline (two micro-batches, one per stage) and the step is the busiest stage's time: the first
// stage's, which exits do not shorten unless a token exits at layer 8. The gain collapses at a
// batch where the unsplit replica still keeps a quarter of it; at 4 stages two micro-batches leave
// half the pipeline idle, the trip sets the step again, and the gain returns. Speedups over full
// depth (makespan):
//                  batch 1: PP 1  PP 2   batch 2: PP 1  PP 2   PP 4   batch 32: PP 1  PP 2
//   batch_sync              1.610 1.608           1.288 1.051  1.264            1.000 1.000
//   state_copy              1.479 1.478           1.224 1.114  1.224            1.083 1.030
//   deferred_fill           1.623 1.625           1.299 1.141  1.278            1.091 1.035
TEST(PipelineParallelDepth, ExitsFreeLaterStagesButTheBusiestStageSetsTheStep) {
  for (const std::string strategy : {"batch_sync", "state_copy", "deferred_fill"}) {
    SCOPED_TRACE(strategy);
    EXPECT_NEAR(speedup(1, 1, strategy, 2), speedup(1, 1, strategy, 1), 0.01);
    const double unsplit = speedup(2, 1, strategy, 1);
    const double two_stages = speedup(2, 1, strategy, 2);
    const double four_stages = speedup(2, 1, strategy, 4);
    EXPECT_GT(unsplit, 1.2);
    EXPECT_LT(two_stages - 1, 0.6 * (unsplit - 1));
    EXPECT_GT(four_stages - 1, 0.9 * (unsplit - 1));
    EXPECT_LT(speedup(32, 1, strategy, 2), 1.05);
  }
}

// The recursive strategies on a pipelined recursive model (RRT's Gemma 1B: 18 executed layers, a
// prelude and two passes of a shared block), split 9 + 9 at the end of the first pass: every
// request finishes with the exits it drew. Depth-wise batching runs the tokens of both passes of
// the block in one step so that the block's weights are read once for them; split at the pass
// boundary, each stage holds its own copy of the block and reads it for its own pass only, so the
// sharing is gone (docs/cost_model.md, "Pipeline parallelism"). state_copy gains nothing here:
// its exited tokens' K/V-only layers are an extra kernel each, and on the H100 preset every
// kernel takes at least 5 us besides its launch, so they cost what the exits save (0.2% slower
// at PP 2, 1.3% at PP 1; as at TP 2 above). Makespans at 8 sequences, full depth against each
// strategy (ms):
//                PP 1: full  early      PP 2: full  early
//   skip_kv           1319  1302              1468  1417
//   shared_kv         1319  1300              1468  1413
//   depthwise         1319  1047              1468  1620
//   state_copy        1319  1335              1468  1471
TEST(PipelineParallelDepth, EveryRecursiveStrategyRunsAndDepthwiseSharesOnlyWithinAStage) {
  const auto run = [](int pipeline, const std::string& strategy) {
    std::vector<std::string> overrides = {"model.preset=rrt-gemma-1b",
                                          "parallel.pipeline=" + std::to_string(pipeline)};
    if (strategy != "none") {
      overrides.insert(overrides.end(),
                       {"exit_policy.kind=distribution", "exit_policy.probabilities=[0.6, 0.4]",
                        "sync.strategy=" + strategy});
    }
    return run_batch(8, overrides);
  };
  const SimulationResult full_one = run(1, "none");
  const SimulationResult full_two = run(2, "none");
  for (const std::string strategy : {"skip_kv", "shared_kv", "depthwise", "state_copy"}) {
    SCOPED_TRACE(strategy);
    const SimulationResult early = run(2, strategy);
    EXPECT_EQ(early.summary.requests, 8);
    EXPECT_EQ(early.summary.output_tokens, full_two.summary.output_tokens);
    EXPECT_NEAR(early.summary.depth.mean_exit_depth, 0.6 * 9 + 0.4 * 18, 0.6);
    if (strategy == "skip_kv" || strategy == "shared_kv") {
      EXPECT_LT(early.summary.makespan, full_two.summary.makespan);
    }
  }
  const auto ratio = [](const SimulationResult& a, const SimulationResult& b) {
    return static_cast<double>(a.summary.makespan) / static_cast<double>(b.summary.makespan);
  };
  EXPECT_LT(ratio(run(1, "depthwise"), full_one), 0.85);
  EXPECT_GT(ratio(run(2, "depthwise"), full_two), 0.98);
}

}  // namespace
}  // namespace exitsim::sim
