#include "exitsim/policy/sync_strategy.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace exitsim::policy {
namespace {

std::vector<DepthPlan> plan(SyncStrategy strategy, const std::vector<int>& exits,
                            std::vector<PendingFill>& pending, int full = 32) {
  std::vector<DepthPlan> out(exits.size());
  plan_depths(strategy, exits, full, pending, out);
  return out;
}

TEST(SyncStrategy, FullDepthIgnoresExits) {
  std::vector<PendingFill> pending(2);
  for (const DepthPlan& p : plan(SyncStrategy::full_depth, {8, 16}, pending)) {
    EXPECT_EQ(p.run_depth, 32);
    EXPECT_EQ(p.useful_depth, 32);
  }
}

TEST(SyncStrategy, BatchSyncCarriesEveryTokenToTheDeepestExitAndMasksTheRest) {
  std::vector<PendingFill> pending(3);
  const auto plans = plan(SyncStrategy::batch_sync, {8, 24, 16}, pending);
  for (const DepthPlan& p : plans)
    EXPECT_EQ(p.run_depth, 24);
  EXPECT_EQ(plans[0].useful_depth, 8);
  EXPECT_EQ(plans[1].useful_depth, 24);
}

TEST(SyncStrategy, StateCopyComputesKvOfSkippedLayersOnly) {
  std::vector<PendingFill> pending(2);
  const auto plans = plan(SyncStrategy::state_copy, {8, 32}, pending);
  EXPECT_EQ(plans[0].run_depth, 8);
  EXPECT_EQ(plans[0].kv_only_to, 32);
  EXPECT_EQ(plans[1].kv_only_to, 0);
}

TEST(SyncStrategy, DeferredFillStacksShallowTokensUntilADeepOneFillsThem) {
  std::vector<PendingFill> pending(1);
  EXPECT_EQ(plan(SyncStrategy::deferred_fill, {16}, pending)[0].fill_tokens, 0);
  EXPECT_EQ(plan(SyncStrategy::deferred_fill, {8}, pending)[0].run_depth, 8);
  EXPECT_EQ(pending[0], (PendingFill{2, 8}));
  const DepthPlan deep = plan(SyncStrategy::deferred_fill, {32}, pending)[0];
  EXPECT_EQ(deep.run_depth, 32);
  EXPECT_EQ(deep.fill_tokens, 2);
  EXPECT_EQ(deep.fill_from_depth, 8);
  EXPECT_EQ(pending[0], PendingFill{});
}

TEST(SyncStrategy, DeferredFillPassesEqualTokensThatNeededDeepKv) {
  // Every shallow token whose sequence later goes deep is filled exactly once; those still
  // pending at the end are never paid.
  std::vector<PendingFill> pending(1);
  const std::vector<int> exits = {8, 8, 32, 16, 32, 8, 8};
  std::int64_t filled = 0;
  for (int exit : exits)
    filled += plan(SyncStrategy::deferred_fill, {exit}, pending)[0].fill_tokens;
  EXPECT_EQ(filled, 3);
  EXPECT_EQ(pending[0].tokens, 2);
}

TEST(SyncStrategy, NamesRoundTrip) {
  for (const std::string& name : sync_strategy_names()) {
    ASSERT_TRUE(parse_sync_strategy(name).has_value()) << name;
    EXPECT_EQ(to_string(*parse_sync_strategy(name)), name);
  }
  EXPECT_EQ(parse_sync_strategy("depthwise"), SyncStrategy::depthwise);
  EXPECT_FALSE(parse_sync_strategy("depth_wise").has_value());
}

}  // namespace
}  // namespace exitsim::policy
