// Dynamic depth in the simulator: exit policies and synchronization strategies against closed
// forms, conservation and the orderings the strategies must show.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

// B requests arriving together, fixed lengths, static batching: every decode iteration holds
// exactly B tokens, so per-iteration quantities have closed forms.
SimulationResult run_batch(int batch, std::vector<std::string> overrides,
                           std::int64_t output_tokens = 200) {
  std::vector<RequestDescriptor> requests;
  for (int i = 0; i < batch; ++i) {
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 64, output_tokens});
  }
  test_support::VectorSource source(requests);
  overrides.push_back("scheduler.kind=static");
  overrides.push_back("scheduler.max_running=" + std::to_string(batch));
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source);
}

const std::vector<std::string> k_layerskip_uniform = {
    "model.preset=layerskip-llama-2-7b", "exit_policy.kind=distribution",
    "exit_policy.probabilities=[0.25, 0.25, 0.25, 0.25]"};

std::vector<std::string> with(std::vector<std::string> base, const std::string& extra) {
  base.push_back(extra);
  return base;
}

// E[max of B independent draws, uniform over the exit depths].
double expected_max_depth(const std::vector<int>& depths, int batch) {
  const double n = static_cast<double>(depths.size());
  double expected = 0;
  for (std::size_t k = 1; k <= depths.size(); ++k) {
    const double p = std::pow(static_cast<double>(k) / n, batch) -
                     std::pow(static_cast<double>(k - 1) / n, batch);
    expected += p * depths[k - 1];
  }
  return expected;
}

TEST(DynamicDepth, BatchSyncStepDepthIsTheExpectedMaximumOfTheBatch) {
  for (int batch : {1, 4, 16}) {
    const SimulationResult r =
        run_batch(batch, with(k_layerskip_uniform, "sync.strategy=batch_sync"), 2000);
    // Prompt tokens run the full depth; 1999 of every request's 2000 tokens are decoded.
    const double decoded = 1999.0 / 2000.0;
    const double expected =
        decoded * expected_max_depth({8, 16, 24, 32}, batch) + (1 - decoded) * 32;
    EXPECT_NEAR(r.summary.depth.mean_executed_depth / expected, 1.0, 0.03) << "batch " << batch;
    EXPECT_NEAR(r.summary.depth.mean_exit_depth, decoded * 20 + (1 - decoded) * 32, 0.6);
  }
}

TEST(DynamicDepth, BatchSyncSpeedupOverFullDepthFallsTowardOneAsTheBatchGrows) {
  double previous_speedup = 1e9;
  for (int batch : {1, 4, 32}) {
    const auto full = run_batch(batch, {"model.preset=layerskip-llama-2-7b"});
    const auto sync = run_batch(batch, with(k_layerskip_uniform, "sync.strategy=batch_sync"));
    const double speedup =
        static_cast<double>(full.summary.makespan) / static_cast<double>(sync.summary.makespan);
    EXPECT_GT(speedup, 0.999) << "batch " << batch;
    EXPECT_LT(speedup, previous_speedup) << "batch " << batch;
    previous_speedup = speedup;
  }
  EXPECT_LT(previous_speedup, 1.05);
}

TEST(DynamicDepth, BatchSyncCountsTheMaskedWork) {
  const SimulationResult r = run_batch(8, with(k_layerskip_uniform, "sync.strategy=batch_sync"));
  EXPECT_GT(r.summary.depth.masked_flops, 0.1 * r.summary.depth.executed_flops);
  const SimulationResult copy = run_batch(8, with(k_layerskip_uniform, "sync.strategy=state_copy"));
  EXPECT_EQ(copy.summary.depth.masked_flops, 0.0);
}

TEST(DynamicDepth, WithoutExitsEveryStrategyEqualsFullDepthExactly) {
  const std::string baseline = summary_to_json(run_batch(6, {"model.preset=rrt-gemma-1b"}).summary);
  for (const char* strategy : {"batch_sync", "state_copy", "deferred_fill", "skip_kv"}) {
    const auto r =
        run_batch(6, {"model.preset=rrt-gemma-1b", "sync.strategy=" + std::string(strategy)});
    EXPECT_EQ(summary_to_json(r.summary), baseline) << strategy;
  }
}

TEST(DynamicDepth, CompactingStrategiesBeatBatchSyncWhenBatchesAreLarge) {
  const TimeNs batch_sync =
      run_batch(64, with(k_layerskip_uniform, "sync.strategy=batch_sync")).summary.makespan;
  for (const char* strategy : {"state_copy", "deferred_fill"}) {
    const TimeNs makespan =
        run_batch(64, with(k_layerskip_uniform, "sync.strategy=" + std::string(strategy)))
            .summary.makespan;
    EXPECT_LT(makespan, batch_sync) << strategy;
  }
}

TEST(DynamicDepth, DeferredFillPaysOnlyForTokensThatLaterNeededDeepKv) {
  const SimulationResult r = run_batch(8, with(k_layerskip_uniform, "sync.strategy=deferred_fill"));
  const auto& exits = r.summary.depth.exit_depth_tokens;
  const std::int64_t shallow = exits.at(8) + exits.at(16) + exits.at(24);
  // Every shallow token owes its layers above its exit, once (policy::plan_depths lifts a state
  // with any deeper token and never runs a layer twice).
  const std::int64_t owed = 24 * exits.at(8) + 16 * exits.at(16) + 8 * exits.at(24);
  const DepthSummary& d = r.summary.depth;
  EXPECT_GT(d.filled_states, 0);
  EXPECT_LE(d.filled_states, shallow);
  EXPECT_LE(d.fill_layers, owed);
  // With a deep token every ~4 tokens, only the final few shallow tokens of each request stay
  // unpaid (at most 24 layers each).
  EXPECT_GE(d.filled_states, shallow - 8 * 12);
  EXPECT_GE(d.fill_layers, owed - 8 * 12 * 24);
  // A state joins each deeper token until the top: at least once, at most three times here.
  EXPECT_GE(d.fill_token_passes, d.filled_states);
  EXPECT_LE(d.fill_token_passes, 3 * shallow);
}

TEST(DynamicDepth, DeferredFillRollbackDiscardsAndRegeneratesTokens) {
  const auto base = with(k_layerskip_uniform, "sync.strategy=deferred_fill");
  const SimulationResult none = run_batch(8, base);
  const SimulationResult always = run_batch(8, with(base, "sync.rollback_probability=1"));
  const SimulationResult some = run_batch(8, with(base, "sync.rollback_probability=0.3"));
  EXPECT_EQ(none.summary.depth.rolled_back_tokens, 0);
  // Probability 1: the oldest pending state always disagrees, so every fill discards every
  // token emitted since it (this iteration's included) and emits the corrected one.
  EXPECT_GT(always.summary.depth.rolled_back_tokens, 0);
  EXPECT_EQ(always.summary.depth.rolled_back_tokens, always.summary.depth.filled_states);
  EXPECT_GT(some.summary.depth.rolled_back_tokens, 0);
  EXPECT_LT(some.summary.depth.rolled_back_tokens, some.summary.depth.filled_states);
  for (const SimulationResult* r : {&always, &some}) {
    EXPECT_EQ(r->totals.requests_finished, 8);
    EXPECT_EQ(r->totals.tokens_emitted, r->totals.tokens_expected);
    EXPECT_EQ(r->totals.kv_blocks_leaked, 0);
    EXPECT_GT(r->summary.makespan, none.summary.makespan);
  }
}

TEST(DynamicDepth, SkipKvMemoryApproachesTheMixtureOfRecursionsFraction) {
  // Recursive Gemma: two recursions of 9 layers, no prelude or coda; uniform exits over the two
  // recursion ends keep K/V for (N_r + 1) / (2 N_r) = 3/4 of a full model's.
  const std::vector<std::string> uniform = {"model.preset=rrt-gemma-1b",
                                            "exit_policy.kind=distribution",
                                            "exit_policy.probabilities=[0.5, 0.5]"};
  const auto full = run_batch(1, {"model.preset=rrt-gemma-1b"}, 4000);
  const auto skip = run_batch(1, with(uniform, "sync.strategy=skip_kv"), 4000);
  const double ratio = static_cast<double>(skip.totals.max_kv_blocks_used) /
                       static_cast<double>(full.totals.max_kv_blocks_used);
  EXPECT_NEAR(ratio, 0.75, 0.02);
}

TEST(DynamicDepth, SyntheticRouterScoresFollowTheirCapacityDistribution) {
  // Synthetic U(0,1) scores, asked for by name: the policy's own top-k mechanics.
  const SimulationResult r =
      run_batch(30, {"model.preset=mor-smollm-360m-r3", "exit_policy.kind=router_expert_choice",
                     "exit_policy.router_scores=uniform", "exit_policy.router_mode=top_k",
                     "exit_policy.capacities=[1.0, 0.6666666666666666, 0.3333333333333333]",
                     "sync.strategy=state_copy"});
  // MoR's default capacities {1, 2/3, 1/3}: a third of the decoded tokens exit at each recursion.
  const auto& exits = r.summary.depth.exit_depth_tokens;
  ASSERT_EQ(exits.size(), 3u);
  const double decoded = 30.0 * 199;
  for (const auto& [depth, tokens] : exits) {
    const double share = (static_cast<double>(tokens) - (depth == 31 ? 30 : 0)) / decoded;
    EXPECT_NEAR(share, 1.0 / 3, 0.02)
        << "depth " << depth << ": " << tokens << " tokens, batch " << r.summary.mean_batch_size;
  }
}

TEST(DynamicDepth, SameSeedSameRun) {
  const auto a = run_batch(8, with(k_layerskip_uniform, "sync.strategy=deferred_fill"));
  const auto b = run_batch(8, with(k_layerskip_uniform, "sync.strategy=deferred_fill"));
  EXPECT_EQ(summary_to_json(a.summary), summary_to_json(b.summary));
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {

TEST(DynamicDepth, ConfidenceIsSimulatedThroughTheMeasuredThresholdTable) {
  const std::string table =
      std::string(EXITSIM_SOURCE_DIR) + "/scenarios/examples/exit_table_smollm_mor3.csv";
  const SimulationResult r =
      run_batch(16,
                {"model.preset=mor-smollm-360m-r3", "exit_policy.kind=confidence",
                 "exit_policy.threshold=0.9", "exit_policy.threshold_table=" + table,
                 "sync.strategy=state_copy"},
                1000);
  // The table's row for 0.9: exits {0.20, 0.30, 0.50} at depths 11, 21, 31.
  const auto& exits = r.summary.depth.exit_depth_tokens;
  const double decoded = 16.0 * 999;
  EXPECT_NEAR(static_cast<double>(exits.at(11)) / decoded, 0.20, 0.015);
  EXPECT_NEAR(static_cast<double>(exits.at(21)) / decoded, 0.30, 0.015);
}

// The same exits drawn from the same shares, decided by confidence or drawn by a distribution:
// the confidence policy also probes the LM head at exit points 11 and 21 for every token still
// running there (docs/cost_model.md, "Exit probes"). SmolLM's 49k-word head is 94 MB: each probe
// reads it (33 us on an H100) and runs three kernels, each with its launch (4 us) and the
// preset's shortest kernel time (5 us): about 62 us a probe, 123 us per step for the two, against
// a step of about 3.1 ms at 16 sequences, most of it the same fixed time of each kernel. The
// run takes 3.8% longer.
TEST(DynamicDepth, AConfidencePolicyPaysForItsProbes) {
  const std::string table =
      std::string(EXITSIM_SOURCE_DIR) + "/scenarios/examples/exit_table_smollm_mor3.csv";
  const std::vector<std::string> base = {"model.preset=mor-smollm-360m-r3",
                                         "sync.strategy=state_copy"};
  const SimulationResult confidence =
      run_batch(16,
                with(with(with(base, "exit_policy.kind=confidence"), "exit_policy.threshold=0.9"),
                     "exit_policy.threshold_table=" + table),
                1000);
  const SimulationResult drawn = run_batch(16,
                                           with(with(base, "exit_policy.kind=distribution"),
                                                "exit_policy.probabilities=[0.2, 0.3, 0.5]"),
                                           1000);
  // The same draws: only the probes differ.
  EXPECT_EQ(confidence.summary.depth.exit_depth_tokens, drawn.summary.depth.exit_depth_tokens);
  const double ratio = static_cast<double>(confidence.summary.makespan) /
                       static_cast<double>(drawn.summary.makespan);
  EXPECT_GT(ratio, 1.025);
  EXPECT_LT(ratio, 1.055);
}

TEST(DynamicDepth, AQualityTableOfAnotherConfidenceMeasureIsRefused) {
  const std::string path = testing::TempDir() + "/exitsim_margin_quality.csv";
  {
    std::ofstream out(path);
    out << "# exitsim-quality-table v2\n"
           "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
           "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n"
           "confidence,state_copy,margin,0.5,,100,1.5,0.95,18,0.4,0.3,0.3\n"
           "confidence,state_copy,margin,0.9,,100,1.4,0.99,24,0.2,0.3,0.5\n";
  }
  const std::vector<std::string> base = {
      "model.preset=mor-smollm-360m-r3", "exit_policy.kind=confidence", "exit_policy.threshold=0.7",
      "exit_policy.threshold_table=" + path, "sync.strategy=state_copy"};
  EXPECT_GT(run_batch(4, with(base, "exit_policy.confidence_measure=margin"), 50)
                .summary.depth.exit_depth_tokens.size(),
            1u);
  try {
    run_batch(4, with(base, "exit_policy.confidence_measure=top1"), 50);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ": exit_policy.confidence_measure: expected the table's measure \"margin\", "
                  "found \"top1\"");
  }
}

TEST(DynamicDepth, ReplayFollowsTheTokenTrace) {
  const std::string path = testing::TempDir() + "/exitsim_replay_tokens.csv";
  {
    std::ofstream out(path);
    out << "# exitsim-token-trace v1\n"
           "request_id,position,exit_depth,exit_point,score,policy,replica,time_ns\n";
    // Request 0 exits at the first exit point at every position; request 1 is absent (full).
    for (int position = 1; position < 50; ++position) {
      out << "0," << position << ",8,0,,confidence,0,0\n";
    }
  }
  const SimulationResult r =
      run_batch(2,
                {"model.preset=layerskip-llama-2-7b", "exit_policy.kind=replay",
                 "exit_policy.token_trace=" + path, "sync.strategy=state_copy"},
                50);
  EXPECT_EQ(r.summary.depth.exit_depth_tokens.at(8), 49);
  EXPECT_EQ(r.summary.depth.exit_depth_tokens.at(32), 51);  // request 1, and both first tokens
}

// A quality table as `exitsim engine eval` writes it for the three-recursion MoR model: trained
// routers send nearly every token out after recursion 1 whatever the threshold.
std::string measured_table(test_support::TempDir& dir) {
  return dir.write(
      "quality.csv",
      "# exitsim-quality-table v2\n"
      "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
      "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n"
      "full_depth,full_depth,,,,1000,2.1,1,31,0,0,1\n"
      "router_expert_choice,state_copy,,0.3,,1000,2.6,0.8,11.2,0.98,0.01,0.01\n"
      "router_expert_choice,state_copy,,0.9,,1000,2.9,0.7,11,0.99,0.005,0.005\n"
      "router_token_choice,state_copy,,,,1000,2.5,0.8,15,0.7,0.2,0.1\n"
      "oracle,state_copy,,,,1000,2.1,1,18,0.5,0.3,0.2\n");
}

double share_at(const SimulationResult& r, int depth, int batch) {
  // Every request's first token comes from its prompt at the full depth.
  const auto& exits = r.summary.depth.exit_depth_tokens;
  const auto found = exits.find(depth);
  const double tokens = found == exits.end() ? 0.0 : static_cast<double>(found->second);
  return (tokens - (depth == 31 ? batch : 0)) / (batch * 199.0);
}

TEST(DynamicDepth, RouterPoliciesTakeTheirExitsFromTheMeasuredTable) {
  test_support::TempDir dir;
  const std::string table = measured_table(dir);
  const std::vector<std::string> mor = {"model.preset=mor-smollm-360m-r3",
                                        "sync.strategy=state_copy",
                                        "exit_policy.threshold_table=" + table};
  // Threshold 0.6 lies between the measured 0.3 and 0.9: the shares interpolate (0.985 at
  // recursion 1), not the U(0,1) answer of 0.6 that synthetic scores give.
  const auto expert = run_batch(
      30, with(with(mor, "exit_policy.kind=router_expert_choice"), "exit_policy.threshold=0.6"));
  EXPECT_NEAR(share_at(expert, 11, 30), 0.985, 0.01);
  const auto token = run_batch(30, with(mor, "exit_policy.kind=router_token_choice"));
  EXPECT_NEAR(share_at(token, 11, 30), 0.7, 0.02);
  EXPECT_NEAR(share_at(token, 31, 30), 0.1, 0.02);
  const auto oracle = run_batch(30, with(mor, "exit_policy.kind=oracle"));
  EXPECT_NEAR(share_at(oracle, 11, 30), 0.5, 0.02);
  EXPECT_NEAR(share_at(oracle, 21, 30), 0.3, 0.02);
}

TEST(DynamicDepth, ModelDependentPoliciesWithoutMeasurementsAreRefused) {
  for (const char* kind : {"router_expert_choice", "router_token_choice", "oracle", "confidence"}) {
    try {
      run_batch(2, {"model.preset=mor-smollm-360m-r3", "sync.strategy=state_copy",
                    std::string("exit_policy.kind=") + kind});
      ADD_FAILURE() << kind << " simulated without measurements";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("exit_policy.threshold_table"), std::string::npos)
          << e.what();
    }
  }
  // The same rule as the engine's: depth-wise batching cannot find an oracle exit.
  EXPECT_THROW(run_batch(2, {"model.preset=rrt-gemma-1b", "exit_policy.kind=oracle",
                             "sync.strategy=depthwise"}),
               InputError);
  // CALM's decay cannot be read from a table measured at a constant threshold.
  test_support::TempDir dir;
  const std::string table =
      dir.write("exits.csv",
                "# exitsim-exit-table v1\nthreshold,p_exit_1,p_exit_2,p_exit_3\n"
                "0.5,0.6,0.3,0.1\n0.9,0.2,0.3,0.5\n");
  try {
    run_batch(2, {"model.preset=mor-smollm-360m-r3", "exit_policy.kind=confidence",
                  "sync.strategy=state_copy", "exit_policy.threshold=0.7",
                  "exit_policy.calm_decay=4", "exit_policy.threshold_table=" + table});
    ADD_FAILURE() << "calm_decay dropped silently";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exit_policy.calm_decay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace exitsim::sim
