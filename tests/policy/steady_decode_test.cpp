// A steady decode step (policy::steady_decode) lets an executor skip the scheduler when the
// scheduler promises to decode every running sequence then (decodes_all_when_steady). These
// tests hold every built-in to that promise on random snapshots at the edges of the budget and
// the free blocks, and check that steady_decode refuses each condition it names.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {
namespace {

// A decoding sequence that holds its footprint (kv_footprint(view, 0)), as executors keep it.
SequenceView decoding(std::uint64_t id, std::int64_t prompt, std::int64_t generated,
                      const KvView& kv) {
  SequenceView view;
  view.id = RequestId{id};
  view.prompt_tokens = prompt;
  view.generated_tokens = generated;
  view.computed_tokens = prompt + generated - 1;
  view.kv_blocks = kv_footprint(view, 0, kv);
  return view;
}

// Running sequences of random lengths, some about to cross a block boundary.
std::vector<SequenceView> random_running(std::mt19937_64& rng, std::size_t n, const KvView& kv) {
  std::uniform_int_distribution<std::int64_t> prompt(1, 300);
  std::uniform_int_distribution<std::int64_t> generated(1, 60);
  std::vector<SequenceView> running;
  for (std::size_t i = 0; i < n; ++i)
    running.push_back(decoding(i, prompt(rng), generated(rng), kv));
  return running;
}

std::int64_t blocks_for_one_more(std::span<const SequenceView> running, const KvView& kv) {
  std::int64_t needed = 0;
  for (const SequenceView& s : running)
    needed += blocks_to_grow(s, 1, kv);
  return needed;
}

TEST(SteadyDecode, EveryBuiltInDecodesEveryRunningSequenceWhenItHolds) {
  std::mt19937_64 rng(7);
  int steady_snapshots = 0;
  int growing_snapshots = 0;
  // The built-ins by name (other tests register schedulers that promise nothing).
  for (const std::string name :
       {"static", "continuous", "chunked_prefill", "shortest_prompt_first"}) {
    const auto scheduler = make_scheduler(name, SchedulerParams{});
    ASSERT_TRUE(scheduler->decodes_all_when_steady()) << name;
    for (int trial = 0; trial < 400; ++trial) {
      KvView kv;
      kv.block_size = std::uniform_int_distribution<std::int64_t>(1, 32)(rng);
      const auto n = std::uniform_int_distribution<std::size_t>(1, 40)(rng);
      const std::vector<SequenceView> running = random_running(rng, n, kv);
      const std::int64_t needed = blocks_for_one_more(running, kv);
      growing_snapshots += needed > 0 ? 1 : 0;
      std::int64_t held = 0;
      for (const SequenceView& s : running)
        held += s.kv_blocks;
      // Free blocks exactly what one more token each needs, or a little more; a token budget of
      // exactly the running count, or more; a watermark that a whole-prompt admission would hit.
      kv.free_blocks = needed + std::uniform_int_distribution<std::int64_t>(0, 2)(rng);
      kv.total_blocks = held + kv.free_blocks;
      SchedulerLimits limits;
      limits.max_running = static_cast<std::int64_t>(n);
      limits.max_batched_tokens =
          static_cast<std::int64_t>(n) + std::uniform_int_distribution<std::int64_t>(0, 3)(rng);
      const SchedulerSnapshot snapshot{running, {}, kv, limits, 0};
      ASSERT_TRUE(steady_decode(snapshot));
      ++steady_snapshots;
      SchedulerDecision decision;
      scheduler->schedule(snapshot, decision);
      EXPECT_TRUE(decision.admit.empty()) << name;
      EXPECT_TRUE(decision.preempt.empty()) << name;
      ASSERT_EQ(decision.work.size(), n) << name << " trial " << trial;
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(decision.work[i], (ScheduledWork{{false, i}, 1})) << name << " row " << i;
    }
  }
  EXPECT_GE(steady_snapshots, 1600);
  // The edge that matters: steps where some sequence takes a new block and the free blocks
  // cover exactly that.
  EXPECT_GT(growing_snapshots, 800);
}

TEST(SteadyDecode, DoesNotHoldWhenAnythingWouldMakeTheSchedulerChooseOtherwise) {
  KvView kv;
  kv.block_size = 4;
  std::vector<SequenceView> running{decoding(1, 7, 1, kv), decoding(2, 3, 2, kv)};
  // 7 computed rows in 2 blocks and 4 rows in 1 block: the second needs a new block.
  ASSERT_EQ(blocks_for_one_more(running, kv), 1);
  kv.free_blocks = 1;
  kv.total_blocks = 4;
  SchedulerLimits limits;
  limits.max_batched_tokens = 2;
  EXPECT_TRUE(steady_decode({running, {}, kv, limits, 0}));

  KvView short_of_blocks = kv;
  short_of_blocks.free_blocks = 0;
  EXPECT_FALSE(steady_decode({running, {}, short_of_blocks, limits, 0}));

  SchedulerLimits short_of_tokens = limits;
  short_of_tokens.max_batched_tokens = 1;
  EXPECT_FALSE(steady_decode({running, {}, kv, short_of_tokens, 0}));

  const std::vector<SequenceView> waiting{decoding(3, 5, 1, kv)};
  EXPECT_FALSE(steady_decode({running, waiting, kv, limits, 0}));

  std::vector<SequenceView> prefilling = running;
  prefilling[1].computed_tokens -= 2;  // a prompt chunk still pending
  EXPECT_FALSE(steady_decode({prefilling, {}, kv, limits, 0}));

  std::vector<SequenceView> parked = running;
  parked[0].in_head_queue = true;
  EXPECT_FALSE(steady_decode({parked, {}, kv, limits, 0}));
}

// blocks_to_grow skips the division where the held blocks cover the rows; it must still be the
// footprint's growth on every layout, one group of one instance or not.
TEST(BlocksToGrow, IsTheFootprintsGrowthOnEveryLayout) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20000; ++trial) {
    KvView kv;
    kv.block_size = std::uniform_int_distribution<std::int64_t>(1, 20)(rng);
    kv.groups.count = std::uniform_int_distribution<std::size_t>(1, 2)(rng);
    for (std::size_t g = 0; g < kv.groups.count; ++g)
      kv.groups.instances[g] = std::uniform_int_distribution<std::int32_t>(1, 3)(rng);
    SequenceView seq;
    seq.prompt_tokens = std::uniform_int_distribution<std::int64_t>(1, 100)(rng);
    seq.generated_tokens = std::uniform_int_distribution<std::int64_t>(0, 30)(rng);
    seq.computed_tokens =
        std::uniform_int_distribution<std::int64_t>(0, seq.known_tokens() - 1)(rng);
    // Held blocks around the footprint: fewer (a sequence about to be allocated), equal, more.
    seq.kv_blocks = std::max<std::int64_t>(
        0, kv_footprint(seq, 0, kv) + std::uniform_int_distribution<std::int64_t>(-3, 3)(rng));
    const std::int64_t tokens =
        std::uniform_int_distribution<std::int64_t>(0, seq.pending_tokens())(rng);
    const std::int64_t expected =
        std::max<std::int64_t>(0, kv_footprint(seq, tokens, kv) - seq.kv_blocks);
    ASSERT_EQ(blocks_to_grow(seq, tokens, kv), expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace exitsim::policy
