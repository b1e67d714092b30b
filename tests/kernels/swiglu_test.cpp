#include "exitsim/kernels/swiglu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(SwigluLaunch, GridStrideOverEveryElement) {
  const LaunchConfig c = swiglu_launch({.rows = 3, .width = 1000});
  EXPECT_EQ(c.threads, 256u);
  EXPECT_EQ(c.grid_x, 12u);  // ceil(3000 / 256)
  EXPECT_EQ(c.shared_bytes, 0u);
  // Huge batches reuse a capped grid rather than overflowing it.
  EXPECT_EQ(swiglu_launch({.rows = 1 << 20, .width = 14336}).grid_x, 65536u);
  EXPECT_TRUE(swiglu_launch({.rows = 0, .width = 64}).empty());
  EXPECT_TRUE(swiglu_launch({.rows = 4, .width = 0}).empty());
}

TEST(SwigluLaunch, RejectsBadShapes) {
  EXPECT_THROW(swiglu_launch({.rows = -1, .width = 4}), std::invalid_argument);
  EXPECT_THROW(swiglu_launch({.rows = 1, .width = 4, .in_stride = 3}), std::invalid_argument);
  EXPECT_THROW(swiglu_launch({.rows = 1, .width = 4, .out_stride = 2}), std::invalid_argument);
  EXPECT_THROW(swiglu<float>(nullptr, nullptr, nullptr, {.rows = 1, .width = -4}),
               std::invalid_argument);
  EXPECT_NO_THROW(swiglu<float>(nullptr, nullptr, nullptr, {.rows = 0, .width = 4}));
}

template <typename T>
class SwigluKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(SwigluKernel, StorageTypes);

TYPED_TEST(SwigluKernel, MatchesTheCpuEngineSeparateAndFused) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(11);
  // Relative bound: silu(g) * u is a product of a few correctly rounded fp32 operations (fp32:
  // ~1e-5 leaves room for expf's 2 ulp), then one rounding to T. The floor covers outputs near 0.
  const float tolerance = testing::storage_tolerance<T>();
  struct Case {
    std::int64_t rows;
    std::int64_t width;
    bool fused;  // gate and up side by side in one [rows, 2 * width] row
  };
  for (const Case c : {Case{1, 1, false}, Case{1, 37, true}, Case{7, 256, false},
                       Case{13, 1000, true}, Case{64, 2048, true}}) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " width " + std::to_string(c.width) +
                 (c.fused ? " fused" : " separate"));
    const std::int64_t stride = c.fused ? 2 * c.width : c.width;
    const auto n = static_cast<std::size_t>(c.rows * stride);
    const std::vector<float> gate = testing::random_values<T>(n, rng, 3.0f);
    const std::vector<float> up = c.fused ? gate : testing::random_values<T>(n, rng);
    const std::int64_t up_offset = c.fused ? c.width : 0;
    const std::vector<float> up_view(up.begin() + up_offset, up.end());
    const std::vector<float> expected =
        testing::swiglu_reference(gate, up_view, c.rows, c.width, stride);

    DeviceBuffer<T> dgate(testing::to_storage<T>(gate));
    DeviceBuffer<T> dup(testing::to_storage<T>(up));
    DeviceBuffer<T> dout(static_cast<std::size_t>(c.rows * c.width));
    const T* up_ptr = c.fused ? dgate.get() + c.width : dup.get();
    swiglu(dgate.get(), up_ptr, dout.get(),
           {.rows = c.rows, .width = c.width, .in_stride = stride});
    testing::synchronize();
    const std::vector<float> actual = testing::to_floats(dout.download());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_LE(std::abs(actual[i] - expected[i]),
                tolerance * std::max(std::abs(expected[i]), 1e-3f))
          << "element " << i;
    }
  }
}

}  // namespace
}  // namespace exitsim::kernels
