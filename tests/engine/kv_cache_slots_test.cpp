// The K/V pool's slots, as the GPU backend mirrors them: a stream's row r lives in the pool slot
// its block table says, and a placeholder row can be filled once the device has computed it.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "exitsim/engine/kv_cache.hpp"

namespace exitsim::engine {
namespace {

TEST(KvCacheSlots, RowsLiveInTheSlotsOfTheirBlocks) {
  KvCache kv(2, 4, 8);
  const int a = kv.open_stream();
  const int b = kv.open_stream();
  const std::vector<float> k = {1, 2}, v = {3, 4};
  for (std::int32_t p = 0; p < 6; ++p) {
    kv.append(a, p, k, v);
    kv.append(b, p, k, v);
  }
  ASSERT_EQ(kv.blocks(a).size(), 2u);
  for (std::int64_t row = 0; row < 6; ++row) {
    const std::int64_t slot = kv.slot(a, row);
    EXPECT_EQ(slot / 4, kv.blocks(a)[static_cast<std::size_t>(row / 4)]);
    EXPECT_EQ(slot % 4, row % 4);
    // The slot addresses the row's K in the pool's layout: block_size K rows, then V rows.
    EXPECT_EQ(kv.key(a, row) - kv.key(a, 0),
              ((slot / 4) * 8 + slot % 4) * 2 - ((kv.slot(a, 0) / 4) * 8 + kv.slot(a, 0) % 4) * 2);
  }
  EXPECT_NE(kv.slot(a, 0), kv.slot(b, 0));
}

TEST(KvCacheSlots, SetRowReplacesAPlaceholder) {
  KvCache kv(2, 4, 2);
  const int s = kv.open_stream();
  const std::vector<float> zeros = {0, 0};
  kv.append(s, 0, zeros, zeros);
  kv.append(s, 1, zeros, zeros);
  const std::vector<float> k = {5, 6}, v = {7, 8};
  kv.set_row(s, 1, k, v);
  EXPECT_EQ(kv.key(s, 1)[0], 5);
  EXPECT_EQ(kv.key(s, 1)[1], 6);
  EXPECT_EQ(kv.value(s, 1)[0], 7);
  EXPECT_EQ(kv.value(s, 1)[1], 8);
  EXPECT_EQ(kv.key(s, 0)[0], 0);
}

// Swap preemption's host tier: a stream's blocks leave the pool (others may take them and write
// over them) and come back into pool blocks with the same rows, positions and values.
TEST(KvCacheSlots, SwapOutAndInKeepsRowsPositionsAndValues) {
  KvCache kv(2, 4, 3, 2);
  const int a = kv.open_stream();
  for (std::int32_t p = 0; p < 6; ++p) {
    const std::vector<float> k = {static_cast<float>(p), 1}, v = {2, static_cast<float>(-p)};
    kv.append(a, 2 * p, k, v);
  }
  ASSERT_EQ(kv.free_blocks(), 1);
  kv.swap_out(a);
  EXPECT_TRUE(kv.swapped(a));
  EXPECT_EQ(kv.free_blocks(), 3);
  EXPECT_EQ(kv.free_host_blocks(), 0);
  EXPECT_EQ(kv.rows(a), 6);
  // Another stream takes the freed blocks and overwrites them.
  const int b = kv.open_stream();
  const std::vector<float> junk = {99, 99};
  for (std::int32_t p = 0; p < 12; ++p)
    kv.append(b, p, junk, junk);
  EXPECT_THROW(kv.swap_in(a), std::logic_error);  // no room in the pool
  EXPECT_THROW(kv.append(a, 20, junk, junk), std::logic_error);
  kv.close_stream(b);
  kv.swap_in(a);
  EXPECT_FALSE(kv.swapped(a));
  EXPECT_EQ(kv.free_host_blocks(), 2);
  ASSERT_EQ(kv.rows(a), 6);
  for (std::int64_t row = 0; row < 6; ++row) {
    EXPECT_EQ(kv.position(a, row), 2 * row);
    EXPECT_EQ(kv.key(a, row)[0], static_cast<float>(row));
    EXPECT_EQ(kv.key(a, row)[1], 1.0F);
    EXPECT_EQ(kv.value(a, row)[0], 2.0F);
    EXPECT_EQ(kv.value(a, row)[1], static_cast<float>(-row));
  }
}

TEST(KvCacheSlots, SwapOutNeedsRoomInTheHostTier) {
  KvCache kv(2, 4, 4, 1);
  const int a = kv.open_stream();
  const std::vector<float> k = {1, 2};
  for (std::int32_t p = 0; p < 5; ++p)
    kv.append(a, p, k, k);
  EXPECT_THROW(kv.swap_out(a), std::logic_error);
  // A swapped stream closed before it came back gives its host blocks back.
  const int b = kv.open_stream();
  kv.append(b, 0, k, k);
  kv.swap_out(b);
  EXPECT_EQ(kv.free_host_blocks(), 0);
  kv.close_stream(b);
  EXPECT_EQ(kv.free_host_blocks(), 1);
}

}  // namespace
}  // namespace exitsim::engine
