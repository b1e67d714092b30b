// Dynamic depth on tensor-parallel replicas (issue 20, point 3): every exit policy and
// synchronization strategy runs on a TP replica, and the system bottleneck of batched early exit
// (a batch runs to its deepest token) reappears under TP for the strategy that has it and not
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

double speedup(int batch, int tensor, const std::string& strategy) {
  const std::vector<std::string> base = {"model.preset=layerskip-llama-2-7b",
                                         "parallel.tensor=" + std::to_string(tensor)};
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
// strategy: the system bottleneck of batched early exit. TP splits the weight reads (a quarter
// each at TP 4) but not the all-reduces' latency, so what state_copy and deferred_fill keep at 32
// (their exited tokens skip attention and the MLP's activations) shrinks further. Speedups over
// full depth (makespan), 400 tokens per sequence, on H100s:
//                  batch 1: TP 1   TP 4    batch 32: TP 1   TP 4
//   batch_sync              1.608  1.611             1.000  1.000
//   state_copy              1.468  1.507             1.071  1.026
//   deferred_fill           1.605  1.608             1.063  1.012
TEST(TensorParallelDepth, TheBatchedEarlyExitBottleneckReappearsUnderTp) {
  for (const std::string strategy : {"batch_sync", "state_copy", "deferred_fill"}) {
    SCOPED_TRACE(strategy);
    double kept_at_tp1 = 0;
    for (const int tensor : {1, 4}) {
      SCOPED_TRACE(tensor);
      EXPECT_GT(speedup(1, tensor, strategy), 1.4);
      const double kept = speedup(32, tensor, strategy) - 1;
      EXPECT_GE(kept, -0.001);
      EXPECT_LT(kept, 0.08);
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
// cost more than they save at 8 sequences on this model, 0.8% slower than full depth.)
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

}  // namespace
}  // namespace exitsim::sim
