#include "exitsim/kernels/rotary.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/engine/rope.hpp"
#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(RotaryLaunch, OneBlockPerRowWithTheFrequenciesInSharedMemory) {
  const LaunchConfig c = rotary_launch({.rows = 7, .heads = 4, .head_dim = 64});
  EXPECT_EQ(c.grid_x, 7u);
  EXPECT_EQ(c.threads, 128u);  // 4 heads x 32 pairs
  EXPECT_EQ(c.shared_bytes, 32 * sizeof(float));
  // Wide rows are capped at 256 threads; narrow ones get one whole warp.
  EXPECT_EQ(rotary_launch({.rows = 1, .heads = 32, .head_dim = 128}).threads, 256u);
  EXPECT_EQ(rotary_launch({.rows = 1, .heads = 1, .head_dim = 2}).threads, 32u);
  EXPECT_TRUE(rotary_launch({.rows = 0, .heads = 2, .head_dim = 8}).empty());
}

TEST(RotaryLaunch, RejectsBadShapes) {
  EXPECT_THROW(rotary_launch({.rows = -1, .heads = 2, .head_dim = 8}), std::invalid_argument);
  EXPECT_THROW(rotary_launch({.rows = 1, .heads = 0, .head_dim = 8}), std::invalid_argument);
  EXPECT_THROW(rotary_launch({.rows = 1, .heads = 2, .head_dim = 7}), std::invalid_argument);
  EXPECT_THROW(rotary_launch({.rows = 1, .heads = 2, .head_dim = 8, .row_stride = 15}),
               std::invalid_argument);
  // Checked before anything touches the (null) pointers; rows to rotate need a frequency table.
  EXPECT_THROW(rotary<float>(nullptr, nullptr, nullptr, {.rows = 1, .heads = 1, .head_dim = 3}),
               std::invalid_argument);
  EXPECT_THROW(rotary<float>(nullptr, nullptr, nullptr, {.rows = 1, .heads = 1, .head_dim = 4}),
               std::invalid_argument);
  EXPECT_NO_THROW(rotary<float>(nullptr, nullptr, nullptr, {.rows = 0, .heads = 1, .head_dim = 4}));
}

template <typename T>
class RotaryKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(RotaryKernel, StorageTypes);

// A shape and the frequencies its rows rotate by (the table the engine hands the kernel).
struct RotaryCase {
  RotaryShape shape;
  double theta = 10000.0;
  engine::RopeScaling scaling = {};
};

TYPED_TEST(RotaryKernel, MatchesTheCpuEngine) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> position(0, 8191);
  // Inputs are O(1), so the bound is absolute, scaled up for large outputs.
  const float tolerance = testing::storage_tolerance<T>();
  const engine::RopeScaling llama3{.kind = engine::RopeScalingKind::llama3,
                                   .factor = 8.0,
                                   .low_freq_factor = 1.0,
                                   .high_freq_factor = 4.0,
                                   .original_max_position_embeddings = 1024};
  for (const RotaryCase& c :
       {RotaryCase{.shape = {.rows = 1, .heads = 1, .head_dim = 32}},
        RotaryCase{.shape = {.rows = 5, .heads = 4, .head_dim = 64}},
        RotaryCase{.shape = {.rows = 9, .heads = 8, .head_dim = 128}},
        RotaryCase{.shape = {.rows = 3, .heads = 2, .head_dim = 6}, .theta = 500.0},
        // K inside a fused K|V row: only the first half rotates.
        RotaryCase{.shape = {.rows = 4, .heads = 2, .head_dim = 64, .row_stride = 256},
        .theta = 1e6},
        // Llama 3.1's scaled frequencies: the kernel rotates by whatever table it is given.
        RotaryCase{.shape = {.rows = 6, .heads = 3, .head_dim = 128},
        .theta = 500000.0,
        .scaling = llama3}}) {
    const RotaryShape& base = c.shape;
    SCOPED_TRACE("rows " + std::to_string(base.rows) + " head_dim " +
                 std::to_string(base.head_dim));
    const std::vector<float> inv_freq = engine::rotary_inv_freq(base.head_dim, c.theta, c.scaling);
    const std::int64_t stride = base.row_stride == 0 ? base.heads * base.head_dim : base.row_stride;
    std::vector<float> x =
        testing::random_values<T>(static_cast<std::size_t>(base.rows * stride), rng);
    std::vector<std::int32_t> positions(static_cast<std::size_t>(base.rows));
    for (auto& p : positions)
      p = position(rng);
    positions[0] = 0;  // the identity rotation
    std::vector<float> expected = x;
    testing::rotary_reference(expected, base.rows, base.heads, base.head_dim, stride, positions,
                              inv_freq);

    DeviceBuffer<T> dx(testing::to_storage<T>(x));
    DeviceBuffer<std::int32_t> dp(positions);
    DeviceBuffer<float> df(inv_freq);
    rotary(dx.get(), dp.get(), df.get(), base);
    testing::synchronize();
    const std::vector<float> actual = testing::to_floats(dx.download());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::abs(actual[i] - expected[i]),
                tolerance * std::max(1.0f, std::abs(expected[i])))
          << "element " << i;
    }
  }
}

}  // namespace
}  // namespace exitsim::kernels
