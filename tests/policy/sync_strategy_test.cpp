#include "exitsim/policy/sync_strategy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <random>
#include <string>
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

PendingFill stack(std::initializer_list<FillGroup> groups) {
  PendingFill p;
  for (const FillGroup& g : groups)
    p.groups[p.count++] = g;
  return p;
}

TEST(SyncStrategy, DeferredFillStacksShallowTokensUntilADeepOneFillsThem) {
  std::vector<PendingFill> pending(1);
  EXPECT_EQ(plan(SyncStrategy::deferred_fill, {16}, pending)[0].fill_count, 0);
  EXPECT_EQ(pending[0], stack({{1, 16}}));
  // A shallower token waits below: groups are ordered oldest (deepest) first.
  EXPECT_EQ(plan(SyncStrategy::deferred_fill, {8}, pending)[0].run_depth, 8);
  EXPECT_EQ(pending[0], stack({{1, 16}, {1, 8}}));
  const DepthPlan deep = plan(SyncStrategy::deferred_fill, {32}, pending)[0];
  EXPECT_EQ(deep.run_depth, 32);
  EXPECT_EQ(deep.fill_tokens(), 2);
  EXPECT_TRUE(deep.fills_complete);
  // Each state from its own depth: 16 + 24 token-layers, not 2 x 24 from the shallowest.
  EXPECT_EQ(deep.fill_layers(), 16 + 24);
  EXPECT_EQ(deep.fill_tokens_at(7), 0);
  EXPECT_EQ(deep.fill_tokens_at(8), 1);
  EXPECT_EQ(deep.fill_tokens_at(16), 2);
  EXPECT_EQ(deep.fill_tokens_at(32), 0);
  EXPECT_EQ(pending[0], PendingFill{});
}

TEST(SyncStrategy, DeferredFillLiftsShallowerStatesWithAnyDeeperToken) {
  // A token of depth 24 takes both pending states along (the one at 8 runs layers 8..23, the one
  // at 16 layers 16..23), and all three wait at 24; a full-depth token later completes them.
  std::vector<PendingFill> pending(1);
  plan(SyncStrategy::deferred_fill, {16}, pending);
  plan(SyncStrategy::deferred_fill, {8}, pending);
  const DepthPlan middle = plan(SyncStrategy::deferred_fill, {24}, pending)[0];
  EXPECT_EQ(middle.fill_tokens(), 2);
  EXPECT_FALSE(middle.fills_complete);
  EXPECT_EQ(middle.fill_layers(), (24 - 8) + (24 - 16));
  EXPECT_EQ(pending[0], stack({{3, 24}}));
  // A token that stops at a group's depth merges into it.
  plan(SyncStrategy::deferred_fill, {24}, pending);
  EXPECT_EQ(pending[0], stack({{4, 24}}));
  const DepthPlan top = plan(SyncStrategy::deferred_fill, {32}, pending)[0];
  EXPECT_EQ(top.fill_tokens(), 4);
  EXPECT_EQ(top.fill_layers(), 4 * 8);
  EXPECT_TRUE(top.fills_complete);
}

TEST(SyncStrategy, DeferredFillRunsEveryStateThroughEveryLayerExactlyOnce) {
  // Whatever the order of exits, a state that ends up filled has run each layer above its exit
  // once: the fill work of a sequence is the sum over its filled states of (full - exit).
  const std::vector<int> exits = {8, 24, 16, 8, 32, 16, 24, 8, 32, 8, 8};
  std::vector<PendingFill> pending(1);
  std::int64_t fill_layers = 0;
  std::int64_t owed = 0;      // full - exit of states since the last full-depth token
  std::int64_t expected = 0;  // of states that were completed
  for (int exit : exits) {
    const DepthPlan p = plan(SyncStrategy::deferred_fill, {exit}, pending)[0];
    fill_layers += p.fill_layers();
    if (exit == 32) {
      expected += owed;
      owed = 0;
    } else {
      owed += 32 - exit;
    }
  }
  // The two states still pending at the end (exits 8, 8) have run nothing above 8.
  EXPECT_EQ(pending[0], stack({{2, 8}}));
  EXPECT_EQ(fill_layers, expected);
}

TEST(SyncStrategy, DeferredFillRefusesMoreExitPointsThanFillGroups) {
  EXPECT_NO_THROW(check_deferred_fill_exit_points(k_max_fill_groups + 1));
  EXPECT_THROW(check_deferred_fill_exit_points(k_max_fill_groups + 2), std::exception);
}

// plan_token_depth is plan_depths one token at a time (the simulator plans each token straight
// into its row): random batches over every strategy, with deferred_fill's pending states carried
// from iteration to iteration, give the same plans and the same states both ways.
TEST(SyncStrategy, OneTokenAtATimePlansAsTheBatchDoes) {
  std::mt19937 rng(7);
  const std::vector<int> exit_points = {8, 16, 24, 32};
  for (const SyncStrategy strategy :
       {SyncStrategy::full_depth, SyncStrategy::batch_sync, SyncStrategy::state_copy,
        SyncStrategy::deferred_fill, SyncStrategy::skip_kv, SyncStrategy::shared_kv}) {
    SCOPED_TRACE(std::string(to_string(strategy)));
    std::vector<PendingFill> batch_pending(6);
    std::vector<PendingFill> token_pending(6);
    int filled = 0;
    for (int iteration = 0; iteration < 200; ++iteration) {
      // Batch 1..6 of the sequences; exits at or below 24 mostly, so deepest varies.
      const auto size = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
      std::vector<int> exits(size);
      for (int& e : exits)
        e = exit_points[std::uniform_int_distribution<std::size_t>(0, 3)(rng)];
      std::vector<PendingFill> pending(batch_pending.begin(),
                                       batch_pending.begin() + static_cast<std::ptrdiff_t>(size));
      std::vector<DepthPlan> batch(size);
      plan_depths(strategy, exits, 32, pending, batch);
      std::copy(pending.begin(), pending.end(), batch_pending.begin());

      const int deepest = deepest_exit(exits);
      EXPECT_EQ(deepest, *std::max_element(exits.begin(), exits.end()));
      for (std::size_t i = 0; i < size; ++i) {
        DepthPlan one;
        plan_token_depth(strategy, exits[i], deepest, 32, &token_pending[i], one);
        ASSERT_EQ(one, batch[i]) << "iteration " << iteration << ", token " << i;
        ASSERT_EQ(token_pending[i], batch_pending[i]) << "iteration " << iteration;
        filled += one.fill_count;
      }
    }
    if (strategy == SyncStrategy::deferred_fill) {
      EXPECT_GT(filled, 100);  // the pending states were exercised
    }
  }
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
