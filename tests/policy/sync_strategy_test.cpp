#include "exitsim/policy/sync_strategy.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <random>
#include <string>
#include <utility>
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

// A plan as the hand writes it: run and useful depth, K/V-only layers, deferred fills.
DepthPlan hand(int run, int useful, int kv_only_to = 0, std::initializer_list<FillGroup> fills = {},
               bool complete = false) {
  DepthPlan p;
  p.run_depth = run;
  p.useful_depth = useful;
  p.kv_only_to = kv_only_to;
  for (const FillGroup& g : fills)
    p.fills[p.fill_count++] = g;
  p.fills_complete = complete;
  return p;
}

// Three sequences A, B, C decode three iterations on a 32-layer stack with exits at 8, 16, 24,
// 32. Their exits (A, B, C): iteration 1: 8, 24, 16 (deepest 24); iteration 2: 16, 8, 8 (deepest
// 16); iteration 3: 32, 24, 32 (deepest 32). Each strategy's plans, worked by hand from the
// strategy table of docs/simulator.md, are what both plan_token_depth (one token at a time, as
// the simulator plans) and plan_depths (the batch) give.
TEST(SyncStrategy, EveryStrategyPlansTheHandWorkedIterations) {
  const std::vector<std::vector<int>> exits = {{8, 24, 16}, {16, 8, 8}, {32, 24, 32}};
  const std::vector<int> deepest = {24, 16, 32};
  using Plans = std::vector<std::vector<DepthPlan>>;  // [iteration][sequence]
  // Tokens run to their own exit and use it all (skip_kv, shared_kv and depthwise plan alike:
  // they differ in what K/V is kept and how steps are formed, not in a token's layers).
  const Plans own_exit = {{hand(8, 8), hand(24, 24), hand(16, 16)},
                          {hand(16, 16), hand(8, 8), hand(8, 8)},
                          {hand(32, 32), hand(24, 24), hand(32, 32)}};
  const Plans full_depth(3, std::vector<DepthPlan>(3, hand(32, 32)));
  // batch_sync: every token runs to the batch's deepest exit; above its own exit it is masked.
  const Plans batch_sync = {{hand(24, 8), hand(24, 24), hand(24, 16)},
                            {hand(16, 16), hand(16, 8), hand(16, 8)},
                            {hand(32, 32), hand(32, 24), hand(32, 32)}};
  // state_copy: a token runs to its exit; an early one computes K/V only up to the top (32).
  const Plans state_copy = {{hand(8, 8, 32), hand(24, 24, 32), hand(16, 16, 32)},
                            {hand(16, 16, 32), hand(8, 8, 32), hand(8, 8, 32)},
                            {hand(32, 32), hand(24, 24, 32), hand(32, 32)}};
  // deferred_fill, sequence by sequence (pending groups oldest first, as {states, depth}):
  // A: 8 leaves {1,8}; 16 takes it along from 8 and both wait at 16: {2,16}; 32 takes both from
  //    16 to the top (complete).
  // B: 24 leaves {1,24}; 8 waits below it: {1,24},{1,8}; 24 takes the one at 8 along and stops
  //    at the other's depth, so all three wait at 24: {3,24}.
  // C: 16 leaves {1,16}; 8: {1,16},{1,8}; 32 takes both, shallowest first, to the top.
  // A token stopping below the top leaves its exit state waiting (every one but the two at 32).
  const auto waits = [](DepthPlan p) {
    p.exit_state_waits = true;
    return p;
  };
  const Plans deferred_fill = {
      {waits(hand(8, 8)), waits(hand(24, 24)), waits(hand(16, 16))},
      {waits(hand(16, 16, 0, {{1, 8}})), waits(hand(8, 8)), waits(hand(8, 8))},
      {hand(32, 32, 0, {{2, 16}}, true), waits(hand(24, 24, 0, {{1, 8}})),
       hand(32, 32, 0, {{1, 8}, {1, 16}}, true)}};
  const std::vector<std::pair<SyncStrategy, const Plans*>> worked = {
      {SyncStrategy::full_depth, &full_depth}, {SyncStrategy::batch_sync, &batch_sync},
      {SyncStrategy::state_copy, &state_copy}, {SyncStrategy::deferred_fill, &deferred_fill},
      {SyncStrategy::skip_kv, &own_exit},      {SyncStrategy::shared_kv, &own_exit},
      {SyncStrategy::depthwise, &own_exit}};
  for (const auto& [strategy, plans] : worked) {
    SCOPED_TRACE(std::string(to_string(strategy)));
    std::vector<PendingFill> token_pending(3);
    std::vector<PendingFill> batch_pending(3);
    for (std::size_t it = 0; it < 3; ++it) {
      EXPECT_EQ(deepest_exit(exits[it]), deepest[it]);
      std::vector<DepthPlan> batch(3);
      plan_depths(strategy, exits[it], 32, batch_pending, batch);
      for (std::size_t seq = 0; seq < 3; ++seq) {
        DepthPlan one;
        plan_token_depth(strategy, exits[it][seq], deepest[it], 32, &token_pending[seq], one);
        EXPECT_EQ(one, (*plans)[it][seq]) << "iteration " << it + 1 << ", sequence " << seq;
        EXPECT_EQ(batch[seq], (*plans)[it][seq]) << "iteration " << it + 1 << ", sequence " << seq;
      }
    }
    // What is left pending: only B's three states at 24 (deferred_fill; nothing otherwise).
    const std::vector<PendingFill> left =
        strategy == SyncStrategy::deferred_fill
            ? std::vector<PendingFill>{PendingFill{}, stack({{3, 24}}), PendingFill{}}
            : std::vector<PendingFill>(3);
    EXPECT_EQ(token_pending, left);
    EXPECT_EQ(batch_pending, left);
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

// The plan read one layer at a time (what the engine executes), worked out by hand on a 32-layer
// stack.
TEST(SyncStrategy, EachLayerRunsMasksOrWritesKvAsThePlanSays) {
  std::vector<PendingFill> none(3);
  // batch_sync, exits 8, 24, 16: everyone runs layers 0..23; token 0's output is unused from
  // layer 8 on, token 2's from 16 on; layer 24 runs nobody.
  const auto carried = plan(SyncStrategy::batch_sync, {8, 24, 16}, none);
  EXPECT_TRUE(carried[0].runs_at(7) && !carried[0].masked_at(7));
  EXPECT_TRUE(carried[0].runs_at(8) && carried[0].masked_at(8));
  EXPECT_TRUE(carried[0].masked_at(23) && !carried[0].runs_at(24));
  EXPECT_TRUE(carried[1].runs_at(23) && !carried[1].masked_at(23));
  EXPECT_TRUE(!carried[2].masked_at(15) && carried[2].masked_at(16));
  for (const DepthPlan& p : carried)
    EXPECT_FALSE(p.kv_only_at(10) || p.kv_only_at(30));
  // state_copy, exits 8 and 32: token 0 runs 0..7 and then writes only its K/V at 8..31.
  const auto copied = plan(SyncStrategy::state_copy, {8, 32}, none);
  EXPECT_TRUE(copied[0].runs_at(7) && !copied[0].kv_only_at(7));
  EXPECT_TRUE(!copied[0].runs_at(8) && copied[0].kv_only_at(8) && copied[0].kv_only_at(31));
  EXPECT_FALSE(copied[0].kv_only_at(32));
  for (int layer = 0; layer < 32; ++layer)
    EXPECT_TRUE(copied[1].runs_at(layer) && !copied[1].kv_only_at(layer)) << layer;
  // skip_kv: token 0 runs 0..7 and nothing else.
  const auto skipped = plan(SyncStrategy::skip_kv, {8, 32}, none);
  EXPECT_TRUE(!skipped[0].runs_at(8) && !skipped[0].kv_only_at(8) && !skipped[0].masked_at(8));
  // deferred_fill: a token stopping below the top leaves its exit state waiting; one at the top
  // does not.
  std::vector<PendingFill> pending(2);
  const auto deferred = plan(SyncStrategy::deferred_fill, {8, 32}, pending);
  EXPECT_TRUE(deferred[0].exit_state_waits);
  EXPECT_FALSE(deferred[1].exit_state_waits);
  EXPECT_FALSE(copied[0].exit_state_waits);
}

// Mid-pass, only the exits taken so far are known: before layer 10 of batch_sync {8, 24, 16},
// token 0 has left at 8 and the others run on. Token 0 rides masked at 10 (the others may go
// anywhere deeper), and once all three have left, layer 24 runs nobody, as the final plan says.
TEST(SyncStrategy, ThePlanSoFarKnowsOnlyTheExitsTakenAndStillAnswersTheLayer) {
  const std::vector<PendingFill> none(3);
  std::vector<DepthPlan> so_far(3);
  plan_so_far(SyncStrategy::batch_sync, std::vector<int>{8, k_still_running, k_still_running}, 32,
              none, so_far);
  EXPECT_TRUE(so_far[0].runs_at(10) && so_far[0].masked_at(10));
  EXPECT_TRUE(so_far[1].runs_at(10) && !so_far[1].masked_at(10));
  plan_so_far(SyncStrategy::batch_sync, std::vector<int>{8, 24, 16}, 32, none, so_far);
  for (const DepthPlan& p : so_far)
    EXPECT_FALSE(p.runs_at(24));
  // deferred_fill with groups 1@16 and 1@8 pending: a running token takes the one at 8 along
  // from layer 8 and both from 16; the step's pending state is left as it was.
  const std::vector<PendingFill> pending = {stack({{1, 16}, {1, 8}})};
  std::vector<DepthPlan> one(1);
  plan_so_far(SyncStrategy::deferred_fill, std::vector<int>{k_still_running}, 32, pending, one);
  EXPECT_EQ(one[0].fill_tokens_at(7), 0);
  EXPECT_EQ(one[0].fill_tokens_at(8), 1);
  EXPECT_EQ(one[0].fill_tokens_at(16), 2);
  EXPECT_EQ(pending[0], stack({{1, 16}, {1, 8}}));
}

// What makes the engine's execution the plan the simulator prices: at every layer, the plan of
// the exits taken so far (a token still running may go anywhere deeper) answers that layer
// exactly as the plan of the final exits does. Random batches over every sequence-wise strategy,
// with deferred_fill's pending states carried from step to step.
TEST(SyncStrategy, ThePlanSoFarAnswersEachLayerAsTheFinalPlanDoes) {
  std::mt19937 rng(11);
  const std::vector<int> exit_points = {8, 16, 24, 32};
  std::int64_t masked = 0, kv_only = 0, filling = 0;
  for (const SyncStrategy strategy :
       {SyncStrategy::full_depth, SyncStrategy::batch_sync, SyncStrategy::state_copy,
        SyncStrategy::deferred_fill, SyncStrategy::skip_kv, SyncStrategy::shared_kv}) {
    SCOPED_TRACE(std::string(to_string(strategy)));
    std::vector<PendingFill> carried(6);
    std::int64_t answers_with_work = 0;
    for (int step = 0; step < 100; ++step) {
      const auto size = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
      std::vector<int> exits(size);
      for (int& e : exits)
        e = exit_points[std::uniform_int_distribution<std::size_t>(0, 3)(rng)];
      const std::vector<PendingFill> before(carried.begin(),
                                            carried.begin() + static_cast<std::ptrdiff_t>(size));
      std::vector<PendingFill> after = before;
      std::vector<DepthPlan> final_plan(size);
      plan_depths(strategy, exits, 32, after, final_plan);
      std::copy(after.begin(), after.end(), carried.begin());
      std::vector<DepthPlan> so_far(size);
      for (int layer = 0; layer < 32; ++layer) {
        std::vector<int> taken(size);
        for (std::size_t i = 0; i < size; ++i)
          taken[i] = exits[i] <= layer ? exits[i] : k_still_running;
        plan_so_far(strategy, taken, 32, before, so_far);
        for (std::size_t i = 0; i < size; ++i) {
          const DepthPlan& now = so_far[i];
          const DepthPlan& last = final_plan[i];
          SCOPED_TRACE("step " + std::to_string(step) + ", layer " + std::to_string(layer) +
                       ", token " + std::to_string(i));
          ASSERT_EQ(now.runs_at(layer), last.runs_at(layer));
          ASSERT_EQ(now.masked_at(layer), last.masked_at(layer));
          ASSERT_EQ(now.kv_only_at(layer), last.kv_only_at(layer));
          ASSERT_EQ(now.fill_tokens_at(layer), last.fill_tokens_at(layer));
          answers_with_work += last.runs_at(layer) || last.kv_only_at(layer) ? 1 : 0;
          masked += last.masked_at(layer) ? 1 : 0;
          kv_only += last.kv_only_at(layer) ? 1 : 0;
          filling += last.fill_tokens_at(layer) > 0 ? 1 : 0;
        }
      }
    }
    EXPECT_GT(answers_with_work, 1000);  // not vacuous: the layers had work to agree on
  }
  // Every kind of answer came up (batch_sync's masks, state_copy's K/V, deferred_fill's states).
  EXPECT_GT(masked, 100);
  EXPECT_GT(kv_only, 100);
  EXPECT_GT(filling, 100);
}

}  // namespace
}  // namespace exitsim::policy
