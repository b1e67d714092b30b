// FREE's adaptive threshold in the simulator (docs/exit_policies.md, "adaptive_threshold"): pairs
// only from deferred_fill passes that complete, refits at first admissions on the threshold grid,
// degenerate refits that keep the threshold, the run's trajectory file and warnings, and the
// calibration table's one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "support/request_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

const std::string k_head =
    "# exitsim-calibration-table v1\n"
    "measure,exit_point,confidence_low,confidence_high,tokens,agreeing\n";

// Two points below the top (mor-smollm-360m-r3 exits at 11, 21 and its full depth). Point 1:
// half the tokens above 0.5, a fifth of all at or above 0.9 (the initial threshold), so tokens
// exit there and wait for a deep token; agreement rises with the confidence. Point 2 low.
const std::string k_mixed = k_head +
                            "margin,1,0,0.5,50,10\n"
                            "margin,1,0.5,0.9,30,20\n"
                            "margin,1,0.9,1,20,19\n"
                            "margin,2,0,0.2,80,20\n"
                            "margin,2,0.2,1,20,15\n";

// `requests` requests of 16 prompt and 48 output tokens arriving together, four at a time.
SimulationResult run(const std::string& table, const std::string& strategy,
                     std::vector<std::string> extra = {}, const std::string& output_dir = "") {
  std::vector<RequestDescriptor> requests;
  for (std::uint64_t i = 0; i < 12; ++i)
    requests.push_back({RequestId(i), TimeNs{0}, 16, 48});
  test_support::VectorSource source(requests);
  std::vector<std::string> overrides = {
      "model.preset=mor-smollm-360m-r3", "scheduler.kind=continuous",
      "scheduler.max_running=4",         "exit_policy.kind=adaptive_threshold",
      "exit_policy.threshold=0.9",       "exit_policy.confidence_measure=margin",
      "sync.strategy=" + strategy};
  if (!table.empty())
    overrides.push_back("exit_policy.calibration_table=" + table);
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, output_dir), source);
}

bool on_grid(double threshold) {
  // FREE's grid: 0.3 + j * 0.6 / 9, j = 0..9.
  const double j = (threshold - 0.3) / (0.6 / 9.0);
  return j > -1e-9 && j < 9 + 1e-9 && std::abs(j - std::round(j)) < 1e-9;
}

TEST(AdaptiveThresholdSim, DeferredFillCollectsPairsAndRefitsOnTheGridAtAdmissions) {
  test_support::TempDir dir;
  const SimulationResult r = run(dir.write("c.csv", k_mixed), "deferred_fill");
  ASSERT_TRUE(r.summary.adaptive_threshold.has_value());
  const AdaptiveThresholdSummary& a = *r.summary.adaptive_threshold;
  EXPECT_GT(a.pairs, 0);
  // 12 requests admitted four at a time: the first admissions (steps 1) see no pair yet, so at
  // most 2 of the 3 admission waves can refit, one attempt each.
  ASSERT_FALSE(a.trajectory.empty());
  EXPECT_LE(a.trajectory.size(), 2u);
  std::int64_t previous_step = 0;
  for (std::size_t k = 0; k < a.trajectory.size(); ++k) {
    const ThresholdTrajectoryRow& row = a.trajectory[k];
    EXPECT_EQ(row.attempt, static_cast<int>(k) + 1);
    EXPECT_GT(row.step, previous_step);
    previous_step = row.step;
    EXPECT_GT(row.pairs, 0);
    EXPECT_LE(row.pairs, a.pairs);
    if (row.fitted) {
      EXPECT_TRUE(on_grid(row.threshold)) << row.threshold;
    }
  }
  // A fitted refit moves the threshold off the initial 0.9 only onto the grid (0.9 is on it too).
  EXPECT_TRUE(on_grid(a.last_threshold()));
  for (const std::string& warning : r.summary.warnings)
    EXPECT_EQ(warning.find("adaptive_threshold"), std::string::npos) << warning;
}

TEST(AdaptiveThresholdSim, OtherStrategiesCollectNoPairAndSaySo) {
  test_support::TempDir dir;
  const SimulationResult r = run(dir.write("c.csv", k_mixed), "skip_kv");
  ASSERT_TRUE(r.summary.adaptive_threshold.has_value());
  EXPECT_EQ(r.summary.adaptive_threshold->pairs, 0);
  EXPECT_TRUE(r.summary.adaptive_threshold->trajectory.empty());
  EXPECT_EQ(r.summary.adaptive_threshold->last_threshold(), 0.9);
  bool said = false;
  for (const std::string& warning : r.summary.warnings)
    said |= warning.find("adaptive_threshold collected no calibration pair") != std::string::npos;
  EXPECT_TRUE(said);
  // Tokens still exit at the fixed 0.9: a fifth of point 1's draws reach it.
  EXPECT_GT(r.summary.depth.exit_depth_tokens.at(11), 0);
}

TEST(AdaptiveThresholdSim, NoTokenExitsBelowItsThresholdSoNoPassAndNoPair) {
  // Every confidence below 0.5 < 0.9: every token runs to the top, nothing waits to be filled.
  test_support::TempDir dir;
  const SimulationResult r = run(dir.write("c.csv", k_head + "margin,1,0,0.5,10,5\n"
                                                             "margin,1,0.5,1,0,0\n"
                                                             "margin,2,0,0.5,10,5\n"
                                                             "margin,2,0.5,1,0,0\n"),
                                 "deferred_fill");
  EXPECT_EQ(r.summary.adaptive_threshold->pairs, 0);
  EXPECT_EQ(r.summary.depth.exit_depth_tokens.count(11), 0u);
  EXPECT_EQ(r.summary.depth.exit_depth_tokens.count(21), 0u);
}

TEST(AdaptiveThresholdSim, OneLabelOnlyMakesEveryRefitDegenerateAndKeepsTheThreshold) {
  // Every token agrees at every point: the mixture has no disagreeing pairs to fit.
  test_support::TempDir dir;
  const SimulationResult r = run(dir.write("c.csv", k_head + "margin,1,0,0.9,80,80\n"
                                                             "margin,1,0.9,1,20,20\n"
                                                             "margin,2,0,1,10,10\n"),
                                 "deferred_fill");
  const AdaptiveThresholdSummary& a = *r.summary.adaptive_threshold;
  EXPECT_GT(a.pairs, 0);
  ASSERT_FALSE(a.trajectory.empty());
  EXPECT_EQ(a.degenerate_refits(), a.refits());
  EXPECT_EQ(a.last_threshold(), 0.9);
  EXPECT_EQ(a.min_threshold(), 0.9);
}

TEST(AdaptiveThresholdSim, WritesTheTrajectoryAsTheSummaryHoldsIt) {
  test_support::TempDir dir;
  const std::string out = dir.dir().string();
  const SimulationResult r = run(dir.write("c.csv", k_mixed), "deferred_fill", {}, out);
  std::ifstream in(out + "/threshold_trajectory.csv");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  std::ostringstream expected;
  write_threshold_trajectory(expected, *r.summary.adaptive_threshold);
  EXPECT_EQ(text.str(), expected.str());
  EXPECT_EQ(text.str().rfind("step,time_s,replica,attempt,pairs,fitted,threshold,alpha0,beta0,"
                             "alpha1,beta1\n",
                             0),
            0u);
}

TEST(AdaptiveThresholdSim, SameSeedSameTrajectory) {
  test_support::TempDir dir;
  const std::string table = dir.write("c.csv", k_mixed);
  EXPECT_EQ(run(table, "deferred_fill").summary.adaptive_threshold,
            run(table, "deferred_fill").summary.adaptive_threshold);
}

TEST(AdaptiveThresholdSim, CalibrationTableProblemsAreOneLineNamingTheKey) {
  test_support::TempDir dir;
  const auto message = [&](const std::string& table, std::vector<std::string> extra = {}) {
    return test_support::error_of([&] { run(table, "deferred_fill", extra); });
  };
  EXPECT_EQ(message(""),
            "exit_policy.calibration_table: expected the engine's calibration table (`exitsim "
            "engine eval` writes it): the simulator draws adaptive_threshold's confidences and "
            "agreements from it, found none");
  const std::string table = dir.write("c.csv", k_mixed);
  EXPECT_EQ(message(table, {"exit_policy.confidence_measure=top1"}),
            "exit_policy.calibration_table: expected a table of measure \"top1\" "
            "(exit_policy.confidence_measure), found \"margin\" in " +
                table);
  const std::string one_point = dir.write("one.csv", k_head + "margin,1,0,1,10,5\n");
  EXPECT_EQ(message(one_point),
            "exit_policy.calibration_table: expected 2 exit points (the model's 3 less the full "
            "depth), found 1 in " +
                one_point);
}

}  // namespace
}  // namespace exitsim::sim
