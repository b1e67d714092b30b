// Golden outputs (tests/golden/README.md): small scenarios whose summary JSON and requests.csv
// digest are checked in, compared byte for byte, so that any change in simulated behaviour shows
// up in review as a diff of these files. Every synchronization strategy under every exit policy
// family (the matrix), every cost model, and three scheduling scenarios at full depth;
// examples_golden_test.cpp holds the shipped example scenarios.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "golden/support/golden_files.hpp"
#include "support/test_files.hpp"

namespace exitsim::golden {
namespace {

// The exit policy families of the matrix, one scenario each under tests/golden/matrix/. The
// model-dependent ones (confidence, oracle) come from measured tables, the routers from
// synthetic scores; router_expert_choice twice, by threshold and by capacity (top-k).
const std::vector<std::string> k_policy_scenarios = {"distribution",
                                                     "position_schedule",
                                                     "confidence",
                                                     "adaptive_threshold",
                                                     "oracle",
                                                     "router_token_choice",
                                                     "router_expert_choice_threshold",
                                                     "router_expert_choice_capacity",
                                                     "replay"};

// The strategies that let tokens exit. full_depth ignores the exit policy, so it gets one golden
// (the baseline) instead of one per family.
const std::vector<std::string> k_exit_strategies = {"batch_sync", "state_copy", "deferred_fill",
                                                    "skip_kv",    "shared_kv",  "depthwise"};

// Combinations the product refuses, each asserted refused below rather than pinned.
bool refused(const std::string& policy, const std::string& strategy) {
  return policy == "oracle" && strategy == "depthwise";
}

GoldenCase matrix_case(const std::string& policy, const std::string& strategy) {
  return {policy + "_" + strategy,
          "tests/golden/matrix/" + policy + ".yaml",
          {"sync.strategy=" + strategy},
          "matrix/" + policy + "." + strategy};
}

std::vector<GoldenCase> matrix_cases() {
  std::vector<GoldenCase> cases{matrix_case("distribution", "full_depth")};
  for (const std::string& policy : k_policy_scenarios) {
    for (const std::string& strategy : k_exit_strategies) {
      if (!refused(policy, strategy))
        cases.push_back(matrix_case(policy, strategy));
    }
  }
  // The variants of two strategies that change how tokens are stepped or kept: depth-wise
  // batching's exited tokens waiting for a shared head call (in the block or in a head queue),
  // and deferred fill's rollbacks.
  for (const std::string exited : {"accumulate", "head_queue"}) {
    cases.push_back(
        {"distribution_depthwise_" + exited,
         "tests/golden/matrix/distribution.yaml",
         {"sync.strategy=depthwise", "sync.exited_tokens=" + exited, "sync.accumulate_threshold=8"},
         "matrix/distribution.depthwise_" + exited});
  }
  cases.push_back({"distribution_deferred_fill_rollback",
                   "tests/golden/matrix/distribution.yaml",
                   {"sync.strategy=deferred_fill", "sync.rollback_probability=0.2"},
                   "matrix/distribution.deferred_fill_rollback"});
  return cases;
}

// One golden per cost model on the same scenario (roofline, table), and the calibrated model on
// the committed profile of the shipped tiny model.
std::vector<GoldenCase> cost_model_cases() {
  return {{"table", "tests/golden/cost/gemma_table.yaml", {}, "cost/gemma.table"},
          {"roofline",
           "tests/golden/cost/gemma_table.yaml",
           {"cost_model={kind: roofline}"},
           "cost/gemma.roofline"},
          {"calibrated", "tests/golden/cost/tiny_calibrated.yaml", {}, "cost/tiny.calibrated"}};
}

// Scheduling at full depth: continuous batching, chunked prefill that preempts on two replicas,
// static batching.
std::vector<GoldenCase> scheduling_cases() {
  std::vector<GoldenCase> cases;
  for (const std::string name : {"small_continuous", "tight_kv_chunked", "static_small_model"})
    cases.push_back({name, "tests/golden/" + name + ".yaml", {}, name});
  return cases;
}

class Golden : public testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesTheCheckedInSummaryAndRequests) {
  const GoldenOutput output = run_golden(GetParam());
  expect_depth_figures_match_the_strategy(output);
  expect_matches_checked_in_files(GetParam(), output);
}

INSTANTIATE_TEST_SUITE_P(Matrix, Golden, testing::ValuesIn(matrix_cases()), golden_case_name);
INSTANTIATE_TEST_SUITE_P(CostModels, Golden, testing::ValuesIn(cost_model_cases()),
                         golden_case_name);
INSTANTIATE_TEST_SUITE_P(Scheduling, Golden, testing::ValuesIn(scheduling_cases()),
                         golden_case_name);

TEST(GoldenMatrix, DepthwiseBatchingRefusesTheOracle) {
  const std::string error =
      test_support::error_of([] { run_golden(matrix_case("oracle", "depthwise")); });
  EXPECT_NE(error.find("exit_policy.kind: the oracle exit policy runs every token to the full "
                       "depth"),
            std::string::npos)
      << error;
}

// The early-exit guard's negative control: the full-depth baseline's summary, presented as a
// skip_kv run with exits (the scenario of the skip_kv golden), fails it; and a batch_sync run
// that masked nothing fails it too.
TEST(GoldenDepthGuard, FailsSummariesThatDoNotShowTheirStrategysEarlyExit) {
  static GoldenOutput relabelled;  // static: EXPECT_NONFATAL_FAILURE reads no locals
  relabelled = run_golden(matrix_case("distribution", "full_depth"));
  relabelled.scenario = run_golden(matrix_case("distribution", "skip_kv")).scenario;
  EXPECT_NONFATAL_FAILURE(expect_depth_figures_match_the_strategy(relabelled),
                          "an early-exit golden at full depth");
  relabelled = run_golden(matrix_case("distribution", "skip_kv"));
  relabelled.scenario = run_golden(matrix_case("distribution", "batch_sync")).scenario;
  EXPECT_NONFATAL_FAILURE(expect_depth_figures_match_the_strategy(relabelled),
                          "batch_sync masked nothing");
}

// A strategy or exit policy added to the product needs its goldens here.
TEST(GoldenMatrix, CoversEveryStrategyAndExitPolicy) {
  std::vector<std::string> strategies = k_exit_strategies;
  strategies.push_back("full_depth");
  for (const std::string& name : policy::sync_strategy_names())
    EXPECT_NE(std::find(strategies.begin(), strategies.end(), name), strategies.end()) << name;
  for (const std::string& kind : policy::exit_policy_names()) {
    if (kind == "none")
      continue;  // no exits: the scheduling goldens and the examples run without a policy
    const bool covered =
        std::any_of(k_policy_scenarios.begin(), k_policy_scenarios.end(),
                    [&](const std::string& scenario) { return scenario.starts_with(kind); });
    EXPECT_TRUE(covered) << kind;
  }
}

}  // namespace
}  // namespace exitsim::golden
