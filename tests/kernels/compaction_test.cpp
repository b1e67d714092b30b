#include "exitsim/kernels/compaction.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/support/device_buffer.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(CompactionLaunch, OneBlockPerIndex) {
  const LaunchConfig c = compaction_launch({.count = 10, .width = 4096, .src_rows = 20});
  EXPECT_EQ(c.grid_x, 10u);
  EXPECT_EQ(c.threads, 256u);
  EXPECT_EQ(compaction_launch({.count = 3, .width = 40}).threads, 64u);
  EXPECT_TRUE(compaction_launch({.count = 0, .width = 8}).empty());
  EXPECT_TRUE(compaction_launch({.count = 5, .width = 0}).empty());
  EXPECT_THROW(compaction_launch({.count = -1, .width = 8}), std::invalid_argument);
  EXPECT_THROW(compaction_launch({.count = 1, .width = -8}), std::invalid_argument);
  EXPECT_THROW(compaction_launch({.count = 1, .width = 8, .src_rows = -1}), std::invalid_argument);
  EXPECT_NO_THROW(gather_rows<float>(nullptr, nullptr, nullptr, {.count = 0, .width = 8}));
}

template <typename T>
class CompactionKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(CompactionKernel, StorageTypes);

// Copies are exact in every type, so results are compared bit for bit (through float, which
// holds fp16 and bf16 values exactly).
TYPED_TEST(CompactionKernel, GatherThenScatterMovesTheActiveRows) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(3);
  for (const std::int64_t width : {1, 33, 512}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const std::int64_t rows = 9;
    const auto w = static_cast<std::size_t>(width);
    const auto src = testing::random_values<T>(static_cast<std::size_t>(rows) * w, rng);
    // Tokens 7, 0, 4 and 8 are still active; -1 and 9 are out of range and skipped.
    const std::vector<std::int32_t> active = {7, 0, 4, 8, -1, 9};
    DeviceBuffer<T> dsrc(testing::to_storage<T>(src));
    DeviceBuffer<std::int32_t> dindex(active);
    const std::vector<float> sentinel(active.size() * w, 42.0f);
    DeviceBuffer<T> dcompact(testing::to_storage<T>(sentinel));
    const CompactionShape shape{.count = 6, .width = width, .src_rows = rows, .dst_rows = rows};
    gather_rows(dsrc.get(), dcompact.get(), dindex.get(), shape);
    testing::synchronize();
    const auto compact = testing::to_floats(dcompact.download());
    for (std::size_t i = 0; i < active.size(); ++i) {
      for (std::size_t c = 0; c < w; ++c) {
        const bool valid = active[i] >= 0 && active[i] < rows;
        const float expected = valid ? src[static_cast<std::size_t>(active[i]) * w + c] : 42.0f;
        ASSERT_EQ(compact[i * w + c], expected) << "row " << i << " column " << c;
      }
    }

    // Scatter the compact rows into a zeroed batch: active rows come back, the rest stay 0.
    DeviceBuffer<T> dfull(testing::to_storage<T>(std::vector<float>(src.size(), 0.0f)));
    scatter_rows(dcompact.get(), dfull.get(), dindex.get(), shape);
    testing::synchronize();
    const auto full = testing::to_floats(dfull.download());
    for (std::int64_t r = 0; r < rows; ++r) {
      const bool is_active = r == 7 || r == 0 || r == 4 || r == 8;
      for (std::size_t c = 0; c < w; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * w + c;
        ASSERT_EQ(full[i], is_active ? src[i] : 0.0f) << "row " << r << " column " << c;
      }
    }
  }
}

}  // namespace
}  // namespace exitsim::kernels
