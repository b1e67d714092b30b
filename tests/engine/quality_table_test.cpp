// The engine's side of quality tables: measured settings become rows, in the format's order, in a
// table the simulator reads back.

#include "exitsim/engine/quality_table.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <vector>

#include "exitsim/policy/exit_table.hpp"

namespace exitsim::engine {
namespace {

QualityMeasurement measured(const std::string& kind, double threshold, std::vector<double> exits) {
  QualityMeasurement m;
  m.exit_policy.kind = kind;
  m.strategy = kind == "none" ? policy::SyncStrategy::full_depth : policy::SyncStrategy::skip_kv;
  m.exit_policy.threshold = threshold;
  m.tokens = 3000;
  m.nll_per_token = 1.25 + threshold / 10;
  m.top1_agreement = 0.75 + threshold / 10;
  m.mean_exit_depth = 8 * exits[0] + 16 * exits[1] + 24 * exits[2];
  m.exit_distribution = std::move(exits);
  return m;
}

TEST(QualityTable, RowsNameTheirSettings) {
  QualityMeasurement margin = measured("confidence", 0.4, {0.5, 0.25, 0.25});
  margin.exit_policy.confidence_measure = "margin";
  const QualityRow row = quality_row_of(margin);
  EXPECT_EQ(row.policy, "confidence");
  EXPECT_EQ(row.measure, "margin");
  EXPECT_EQ(row.threshold, 0.4);
  EXPECT_TRUE(row.capacities.empty());
  EXPECT_EQ(row.tokens, 3000);
  EXPECT_EQ(row.nll_per_token, margin.nll_per_token);
  EXPECT_EQ(row.top1_agreement, margin.top1_agreement);
  EXPECT_EQ(row.mean_exit_depth, 14.0);
  EXPECT_EQ(row.p_exit, (std::vector<double>{0.5, 0.25, 0.25}));

  const QualityRow full = quality_row_of(measured("none", 0.9, {0, 0, 1}));
  EXPECT_EQ(full.policy, "full_depth");
  EXPECT_EQ(full.measure, "");
  EXPECT_FALSE(full.threshold.has_value());

  QualityMeasurement top_k = measured("router_expert_choice", 0.5, {0.25, 0.25, 0.5});
  top_k.exit_policy.router_mode = "top_k";
  top_k.exit_policy.capacities = {1, 0.75, 0.5};
  EXPECT_FALSE(quality_row_of(top_k).threshold.has_value());
  EXPECT_EQ(quality_row_of(top_k).capacities, (std::vector<double>{1, 0.75, 0.5}));
  top_k.exit_policy.router_mode = "threshold";
  EXPECT_EQ(quality_row_of(top_k).threshold, 0.5);
  EXPECT_TRUE(quality_row_of(top_k).capacities.empty());

  const QualityRow token_choice = quality_row_of(measured("router_token_choice", 0.9, {0, 1, 0}));
  EXPECT_FALSE(token_choice.threshold.has_value());
}

TEST(QualityTable, TablesFollowTheFormatsOrderAndFeedTheSimulator) {
  const std::vector<QualityMeasurement> measurements = {
      measured("none", 0.9, {0, 0, 1}),
      measured("confidence", 0.9, {0.2, 0.3, 0.5}),
      measured("router_expert_choice", 0.5, {0.3, 0.3, 0.4}),
      measured("confidence", 0.5, {0.5, 0.3, 0.2}),
      measured("confidence", 0.9, {0.2, 0.3, 0.5}),
  };
  const QualityTable table = quality_table_of(measurements);
  ASSERT_EQ(table.rows().size(), 4u);
  EXPECT_EQ(table.rows()[0], quality_row_of(measurements[0]));
  EXPECT_EQ(table.rows()[1], quality_row_of(measurements[3]));
  EXPECT_EQ(table.rows()[2], quality_row_of(measurements[1]));
  EXPECT_EQ(table.rows()[3], quality_row_of(measurements[2]));

  std::ostringstream out;
  table.write(out);
  std::istringstream in(out.str());
  EXPECT_EQ(QualityTable::parse(in, "eval.csv"), table);
  std::istringstream again(out.str());
  const policy::ExitTable exits = policy::ExitTable::parse(again, "eval.csv", "skip_kv");
  EXPECT_EQ(exits.measure(), "top1");
  EXPECT_EQ(exits.exit_distribution_for(0.5), (std::vector<double>{0.5, 0.3, 0.2}));
  EXPECT_EQ(exits.exit_distribution_for(0.9), (std::vector<double>{0.2, 0.3, 0.5}));
}

TEST(QualityTable, EachStrategyIsItsOwnRow) {
  QualityMeasurement copy = measured("confidence", 0.5, {0.6, 0.3, 0.1});
  copy.strategy = policy::SyncStrategy::state_copy;
  copy.nll_per_token = 1.1;
  const std::vector<QualityMeasurement> measurements = {
      measured("none", 0.9, {0, 0, 1}), measured("confidence", 0.5, {0.5, 0.3, 0.2}), copy};
  const QualityTable table = quality_table_of(measurements);
  ASSERT_EQ(table.rows().size(), 3u);
  EXPECT_EQ(table.rows()[0].strategy, "full_depth");
  const QualityRow* skip =
      policy::find_quality_row(table, {"confidence", "skip_kv", "top1", 0.5, {}});
  const QualityRow* state =
      policy::find_quality_row(table, {"confidence", "state_copy", "top1", 0.5, {}});
  ASSERT_TRUE(skip != nullptr && state != nullptr);
  EXPECT_EQ(state->nll_per_token, 1.1);
  EXPECT_NE(skip->nll_per_token, 1.1);
  // The simulator reads each strategy's own exit distribution.
  EXPECT_EQ(policy::ExitTable::from_quality_table(table, "state_copy").exit_distribution_for(0.5),
            (std::vector<double>{0.6, 0.3, 0.1}));
}

TEST(QualityTable, MeasuringBugsAreNotWritten) {
  QualityMeasurement decayed = measured("confidence", 0.5, {0.5, 0.3, 0.2});
  decayed.exit_policy.calm_decay = 4;
  decayed.nll_per_token += 0.5;
  const std::vector<QualityMeasurement> same_setting = {
      measured("confidence", 0.5, {0.5, 0.3, 0.2}), decayed};
  EXPECT_THROW(quality_table_of(same_setting), std::invalid_argument);
  const std::vector<QualityMeasurement> unnormalized = {measured("none", 0.9, {0, 0, 0.5})};
  EXPECT_THROW(quality_table_of(unnormalized), std::invalid_argument);
  EXPECT_THROW(quality_table_of({}), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::engine
