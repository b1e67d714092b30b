// A steady decode step (policy::steady_decode) lets an executor skip the scheduler when the
// scheduler promises to decode every running sequence then (decodes_all_when_steady). These
// tests hold every built-in to that promise on random snapshots at the edges of the budget and
// the free blocks, and check that steady_decode refuses each condition it names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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

// The oracle for blocks_to_grow: a paged allocator's walk. Each K/V instance of a row group has
// its own block table; walking its rows one by one, a block is opened whenever a row finds the
// last block full. Group g holds computed_tokens + kv_row_offset[g] rows (fewer where exited
// tokens stored none, skip_kv; one more where a depth-wise token in flight wrote its row ahead).
// Each new token adds a row at every instance, except where its row was written ahead already.
std::int64_t walked_blocks(const SequenceView& seq, std::int64_t tokens, const KvView& kv) {
  std::int64_t blocks = 0;
  for (std::size_t g = 0; g < kv.groups.count; ++g) {
    const std::int64_t offset = seq.kv_row_offset[g];
    std::int64_t rows = seq.computed_tokens + offset;
    for (std::int64_t t = 0; t < tokens; ++t)
      rows += t < offset ? 0 : 1;  // the first `offset` new tokens' rows are written already
    for (std::int32_t instance = 0; instance < kv.groups.instances[g]; ++instance) {
      std::int64_t room_in_last_block = 0;
      for (std::int64_t row = 0; row < rows; ++row) {
        if (room_in_last_block == 0) {
          ++blocks;
          room_in_last_block = kv.block_size;
        }
        --room_in_last_block;
      }
    }
  }
  return blocks;
}

struct WorkedGrowth {
  const char* layout;
  std::int64_t block_size;
  std::vector<std::int32_t> instances;  // per row group
  std::vector<std::int32_t> row_offsets;
  std::int64_t prompt, generated, computed, held;
  std::int64_t tokens;
  std::int64_t grows;  // worked by hand below
};

TEST(BlocksToGrow, GivesTheHandWorkedGrowthOnEveryLayout) {
  const std::vector<WorkedGrowth> cases = {
      // One instance, 16-row blocks: 32 computed rows fill 2 blocks exactly; the 33rd opens a 3rd.
      {"plain, at a block boundary", 16, {1}, {0}, 30, 3, 32, 2, 1, 1},
      // 31 rows in 2 blocks; the 32nd still fits the second.
      {"plain, inside a block", 16, {1}, {0}, 30, 2, 31, 2, 1, 0},
      // A 40-token prompt chunk on 4 instances: 40 rows = 3 blocks of 16 at each, 12 in all.
      {"prefill, 4 instances", 16, {4}, {0}, 40, 0, 0, 0, 40, 12},
      // skip_kv, 4-row blocks: group 0 (3 instances) holds 15 rows = 4 blocks each (12); group 1
      // (2 instances) holds 3 rows fewer, 12 rows = 3 blocks each (6): 18 held. One more token:
      // 16 rows = 4 blocks (12) and 13 rows = 4 blocks (8), 20 in all: 2 more.
      {"skip_kv, a recursion short", 4, {3, 2}, {0, -3}, 10, 6, 15, 18, 1, 2},
      // The same sequence holding 2 blocks more than its footprint grows by nothing (not -).
      {"skip_kv, more held", 4, {3, 2}, {0, -3}, 10, 6, 15, 20, 1, 0},
      // depthwise, a token in flight wrote its group-0 row ahead: group 0 holds 11 + 1 = 12 rows
      // (3 blocks x 2), group 1 11 rows (3 x 2): 12 held. Its own token adds no group-0 row and
      // the group-1 row 12, still 3 blocks: 0 more.
      {"depthwise, one token", 4, {2, 2}, {1, 0}, 8, 4, 11, 12, 1, 0},
      // (Counting the row written ahead twice would make group 0 13 rows, 4 blocks: 2 more.)
      // skip_kv, a recursion no token has reached yet: group 1 holds no row and no block; the
      // next token's row opens its first block, and group 0's 8th row fits its 2nd: 1 more.
      {"skip_kv, an empty group", 4, {1, 1}, {0, -7}, 6, 2, 7, 2, 1, 1},
  };
  for (const WorkedGrowth& c : cases) {
    SCOPED_TRACE(c.layout);
    KvView kv;
    kv.block_size = c.block_size;
    kv.groups.count = c.instances.size();
    SequenceView seq;
    seq.prompt_tokens = c.prompt;
    seq.generated_tokens = c.generated;
    seq.computed_tokens = c.computed;
    seq.kv_blocks = c.held;
    for (std::size_t g = 0; g < c.instances.size(); ++g) {
      kv.groups.instances[g] = c.instances[g];
      seq.kv_row_offset[g] = c.row_offsets[g];
    }
    EXPECT_EQ(blocks_to_grow(seq, c.tokens, kv), c.grows);
    // The walk agrees with the hand (it is the oracle of the random layouts below).
    EXPECT_EQ(std::max<std::int64_t>(0, walked_blocks(seq, c.tokens, kv) - c.held), c.grows);
  }
}

// Random layouts against the walk: one or more groups of one or more instances, rows short of
// (skip_kv) or ahead of (depthwise) the computed tokens, held blocks around the footprint.
TEST(BlocksToGrow, IsWhatABlockByBlockWalkAllocatesOnRandomLayouts) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 5000; ++trial) {
    KvView kv;
    kv.block_size = std::uniform_int_distribution<std::int64_t>(1, 20)(rng);
    kv.groups.count = std::uniform_int_distribution<std::size_t>(1, 3)(rng);
    SequenceView seq;
    seq.prompt_tokens = std::uniform_int_distribution<std::int64_t>(1, 100)(rng);
    seq.generated_tokens = std::uniform_int_distribution<std::int64_t>(0, 30)(rng);
    seq.computed_tokens =
        std::uniform_int_distribution<std::int64_t>(0, seq.known_tokens() - 1)(rng);
    for (std::size_t g = 0; g < kv.groups.count; ++g) {
      kv.groups.instances[g] = std::uniform_int_distribution<std::int32_t>(1, 3)(rng);
      // Group 0 (the prelude and recursion 1) holds every token; deeper ones may hold fewer.
      const auto shortest = static_cast<std::int32_t>(g == 0 ? 0 : -seq.computed_tokens);
      seq.kv_row_offset[g] = std::uniform_int_distribution<std::int32_t>(shortest, 1)(rng);
    }
    const std::int64_t tokens =
        std::uniform_int_distribution<std::int64_t>(1, seq.pending_tokens())(rng);
    seq.kv_blocks = std::max<std::int64_t>(
        0, walked_blocks(seq, 0, kv) + std::uniform_int_distribution<std::int64_t>(-3, 3)(rng));
    const std::int64_t expected =
        std::max<std::int64_t>(0, walked_blocks(seq, tokens, kv) - seq.kv_blocks);
    ASSERT_EQ(blocks_to_grow(seq, tokens, kv), expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace exitsim::policy
