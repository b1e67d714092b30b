#include "exitsim/kernels/lora.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "kernels/support/device_buffer.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(LoraLaunch, OneBlockPerRowWithSharedMemoryForTheLargestRank) {
  const LaunchConfig c = lora_launch({.rows = 7, .in = 960, .out = 320, .max_rank = 16});
  EXPECT_EQ(c.grid_x, 7u);
  EXPECT_EQ(c.threads, 256u);
  EXPECT_EQ(c.shared_bytes, 16 * sizeof(float));
  EXPECT_EQ(lora_launch({.rows = 1, .in = 8, .out = 40, .max_rank = 2}).threads, 64u);
  EXPECT_TRUE(lora_launch({.rows = 0, .in = 8, .out = 8, .max_rank = 2}).empty());
  EXPECT_TRUE(lora_launch({.rows = 3, .in = 8, .out = 8, .max_rank = 0}).empty());
  EXPECT_THROW(lora_launch({.rows = 1, .in = 8, .out = 8, .max_rank = 5000}),
               std::invalid_argument);
  EXPECT_THROW(lora_launch({.rows = 1, .in = 8, .out = 8, .max_rank = 2, .x_stride = 4}),
               std::invalid_argument);
  EXPECT_THROW(lora_launch({.rows = 1, .in = 8, .out = 8, .max_rank = 2, .y_stride = 4}),
               std::invalid_argument);
  EXPECT_THROW(lora_launch({.rows = -1, .in = 8, .out = 8, .max_rank = 2}), std::invalid_argument);
  EXPECT_NO_THROW((lora_add<float, float>(nullptr, nullptr, {}, {.rows = 0, .in = 4, .out = 4})));
}

template <typename Types>
class LoraKernel : public ::testing::Test {};
using LoraPairs =
    ::testing::Types<testing::StoragePair<float, float>, testing::StoragePair<__half, __half>,
                     testing::StoragePair<__half, float>,
                     testing::StoragePair<__nv_bfloat16, __nv_bfloat16>,
                     testing::StoragePair<__nv_bfloat16, float>>;
TYPED_TEST_SUITE(LoraKernel, LoraPairs);

// Rows with different adapters (one of rank 0, one row with none), strided rows, against the
// CPU engine's y += B (A x).
TYPED_TEST(LoraKernel, AddsEachRowsAdapterAsTheCpuDoes) {
  using T = typename TypeParam::input;
  using Out = typename TypeParam::output;
  if (!cuda_device_available())
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  std::mt19937 rng(99);
  const std::int64_t rows = 6, in = 300, out = 70, x_stride = 310, y_stride = 75;
  const std::vector<int> ranks{4, 0, 8};
  const std::vector<std::int32_t> adapter{0, 1, 2, -1, 2, 0};
  std::vector<float> a_all, b_all;
  std::vector<std::int32_t> a_offset, b_offset;
  for (const int rank : ranks) {
    a_offset.push_back(static_cast<std::int32_t>(a_all.size()));
    b_offset.push_back(static_cast<std::int32_t>(b_all.size()));
    const std::vector<float> a =
        testing::random_values<T>(static_cast<std::size_t>(rank * in), rng, 0.1f);
    const std::vector<float> b =
        testing::random_values<T>(static_cast<std::size_t>(out * rank), rng, 0.1f);
    a_all.insert(a_all.end(), a.begin(), a.end());
    b_all.insert(b_all.end(), b.begin(), b.end());
  }
  const std::vector<float> x =
      testing::random_values<T>(static_cast<std::size_t>(rows * x_stride), rng);
  const std::vector<float> y =
      testing::random_values<Out>(static_cast<std::size_t>(rows * y_stride), rng);

  std::vector<float> expected = y;
  for (std::int64_t r = 0; r < rows; ++r) {
    const int a = adapter[static_cast<std::size_t>(r)];
    if (a < 0 || ranks[static_cast<std::size_t>(a)] == 0)
      continue;
    const int rank = ranks[static_cast<std::size_t>(a)];
    const Eigen::Map<const engine::Matrix> lora_a(
        a_all.data() + a_offset[static_cast<std::size_t>(a)], rank, in);
    const Eigen::Map<const engine::Matrix> lora_b(
        b_all.data() + b_offset[static_cast<std::size_t>(a)], out, rank);
    const Eigen::Map<const Eigen::VectorXf> x_row(x.data() + r * x_stride, in);
    const Eigen::VectorXf down = lora_a * x_row;
    const Eigen::VectorXf add = lora_b * down;
    for (std::int64_t i = 0; i < out; ++i)
      expected[static_cast<std::size_t>(r * y_stride + i)] += add[i];
  }

  const DeviceBuffer<T> da(testing::to_storage<T>(a_all));
  const DeviceBuffer<T> db(testing::to_storage<T>(b_all));
  const DeviceBuffer<std::int32_t> dao(a_offset);
  const DeviceBuffer<std::int32_t> dbo(b_offset);
  const DeviceBuffer<std::int32_t> dr(std::vector<std::int32_t>(ranks.begin(), ranks.end()));
  const DeviceBuffer<std::int32_t> dadapter(adapter);
  const DeviceBuffer<T> dx(testing::to_storage<T>(x));
  DeviceBuffer<Out> dy(testing::to_storage<Out>(y));
  lora_add<T, Out>(dx.get(), dy.get(),
                   {.a = da.get(),
                    .b = db.get(),
                    .a_offset = dao.get(),
                    .b_offset = dbo.get(),
                    .rank = dr.get(),
                    .adapter = dadapter.get()},
                   {.rows = rows,
                    .in = in,
                    .out = out,
                    .max_rank = 8,
                    .x_stride = x_stride,
                    .y_stride = y_stride});
  testing::synchronize();
  const std::vector<float> got = testing::to_floats(dy.download());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float e = expected[i];
    ASSERT_LE(std::abs(got[i] - e), testing::storage_tolerance<Out>() * std::max(std::abs(e), 0.1f))
        << "element " << i;
  }
}

}  // namespace
}  // namespace exitsim::kernels
