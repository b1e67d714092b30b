// The prefix cache shared by the executors: block hashes chained from a prompt's start, reference
// counts, and eviction of unreferenced blocks, least recently released first.
#include "exitsim/policy/prefix_cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "exitsim/policy/block_hash_index.hpp"

namespace exitsim::policy {
namespace {

// Two requests that share their first 512-token source block and differ in the second share
// exactly the 32 scheduler blocks of 16 tokens in the first; a partial source block is never
// shareable.
TEST(PrefixCacheHashes, ShareExactlyTheBlocksOfCommonWholeSourceBlocks) {
  const std::vector<std::uint64_t> a = {7, 8, 9};
  const std::vector<std::uint64_t> b = {7, 5, 9};
  const std::vector<BlockHash> ha = scheduler_block_hashes(a, 512, 1536, 16);
  const std::vector<BlockHash> hb = scheduler_block_hashes(b, 512, 1536, 16);
  ASSERT_EQ(ha.size(), 96U);
  ASSERT_EQ(hb.size(), 96U);
  for (std::size_t i = 0; i < 96; ++i)
    EXPECT_EQ(ha[i] == hb[i], i < 32) << i;
  // 1000 tokens hold one whole source block, whatever hashes the trace lists.
  EXPECT_EQ(scheduler_block_hashes(a, 512, 1000, 16).size(), 32U);
  // Scheduler blocks larger than the source's: 1024 tokens need two whole source blocks.
  const std::vector<BlockHash> big = scheduler_block_hashes(a, 512, 1536, 1024);
  ASSERT_EQ(big.size(), 1U);
  EXPECT_NE(big[0], scheduler_block_hashes(b, 512, 1536, 1024)[0]);
  // Block position is part of the name: one source block's 32 blocks are all distinct.
  for (std::size_t i = 1; i < 32; ++i)
    EXPECT_NE(ha[i], ha[i - 1]);
  EXPECT_TRUE(scheduler_block_hashes(a, 0, 1536, 16).empty());
}

// A and B share their first two blocks. Released, a sequence's blocks go last first, so the
// eviction order is A's tail, then B's tail, then the shared head from its end.
TEST(PrefixCache, EvictsUnreferencedBlocksLeastRecentlyReleasedFirst) {
  PrefixCache cache;
  const std::vector<BlockHash> a = {1, 2, 3};
  const std::vector<BlockHash> b = {1, 2, 4};
  for (const BlockHash h : a)
    EXPECT_TRUE(cache.insert(h));
  const PrefixCache::Match hit = cache.match(b);
  EXPECT_EQ(hit.blocks, 2U);
  EXPECT_EQ(hit.unreferenced, 0U);
  EXPECT_EQ(cache.acquire(b, 2), 0U);  // referenced by A already: nothing leaves the free pool
  EXPECT_TRUE(cache.insert(4));
  EXPECT_FALSE(cache.insert(1));  // cached: a second copy is not kept

  EXPECT_EQ(cache.release(a, 3), 1U);  // only block 3 is nobody's now
  EXPECT_EQ(cache.release(b, 3), 3U);
  EXPECT_EQ(cache.eviction_order(), (std::vector<BlockHash>{3, 4, 2, 1}));
  EXPECT_EQ(cache.unreferenced_blocks(), 4U);

  // A hit takes blocks out of the eviction queue.
  const std::vector<BlockHash> c = {1, 2, 9};
  EXPECT_EQ(cache.match(c).unreferenced, 2U);
  EXPECT_EQ(cache.acquire(c, 2), 2U);
  EXPECT_EQ(cache.eviction_order(), (std::vector<BlockHash>{3, 4}));
  const std::uint64_t before = cache.version();
  EXPECT_EQ(cache.evict(5), 2U);
  EXPECT_NE(cache.version(), before);
  EXPECT_EQ(cache.match(a).blocks, 2U);
  EXPECT_EQ(cache.cached_blocks(), 2U);
  EXPECT_EQ(cache.release(c, 2), 2U);
  EXPECT_EQ(cache.eviction_order(), (std::vector<BlockHash>{2, 1}));
}

// evict() with names forgets the same blocks as without, and names them in eviction order.
TEST(PrefixCache, EvictionNamesTheBlocksItForgets) {
  PrefixCache cache;
  const std::vector<BlockHash> a = {1, 2, 3, 4};
  for (const BlockHash h : a)
    cache.insert(h);
  cache.release(a, 4);  // 4, 3, 2, 1
  std::vector<BlockHash> evicted = {99};
  EXPECT_EQ(cache.evict(3, evicted), 3U);
  EXPECT_EQ(evicted, (std::vector<BlockHash>{99, 4, 3, 2}));
  EXPECT_EQ(cache.eviction_order(), (std::vector<BlockHash>{1}));
  EXPECT_EQ(cache.evict(5, evicted), 1U);
  EXPECT_EQ(evicted.back(), 1U);
  EXPECT_EQ(cache.cached_blocks(), 0U);
}

// The open-addressing index agrees with std::unordered_map over random inserts and erases,
// with keys crowded into a few buckets' worth of values so that erasing shifts long runs back.
TEST(BlockHashIndex, AgreesWithAStandardMapUnderRandomInsertsAndErases) {
  BlockHashIndex index;
  std::unordered_map<std::uint64_t, std::uint32_t> reference;
  std::mt19937_64 random(7);
  for (std::uint32_t step = 0; step < 200000; ++step) {
    const std::uint64_t key = random() % 5000;
    if (random() % 3 == 0) {
      EXPECT_EQ(index.erase(key), reference.erase(key) == 1) << step;
    } else if (reference.count(key) == 0) {
      index.insert(key, step);
      reference[key] = step;
    }
    const std::uint64_t probe = random() % 5000;
    const std::uint32_t* found = index.find(probe);
    const auto it = reference.find(probe);
    ASSERT_EQ(found != nullptr, it != reference.end()) << step;
    if (found != nullptr) {
      EXPECT_EQ(*found, it->second) << step;
    }
  }
  EXPECT_EQ(index.size(), reference.size());
  std::size_t visited = 0;
  index.for_each([&](std::uint64_t key, std::uint32_t& value) {
    ++visited;
    EXPECT_EQ(reference.at(key), value);
  });
  EXPECT_EQ(visited, reference.size());
}

}  // namespace
}  // namespace exitsim::policy
