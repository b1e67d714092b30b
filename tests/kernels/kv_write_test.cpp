#include "exitsim/kernels/kv_write.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/engine/rope.hpp"
#include "exitsim/kernels/kv_project.hpp"
#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(KvPoolLayout, MatchesTheEngineKvCache) {
  // A fresh KvCache hands out blocks lowest first, so one stream's row r lives in slot r and
  // the pointer distances from row 0 are exactly the pool offsets.
  const std::int64_t width = 6;
  const std::int64_t block_size = 4;
  engine::KvCache kv(width, block_size, 5);
  const int s = kv.open_stream();
  const std::vector<float> row(static_cast<std::size_t>(width), 1.0f);
  for (std::int32_t r = 0; r < 18; ++r)
    kv.append(s, r, row, row);
  const float* base = kv.key(s, 0);
  for (std::int64_t r = 0; r < 18; ++r) {
    EXPECT_EQ(kv.key(s, r) - base, kv_key_offset(r, width, block_size)) << "row " << r;
    EXPECT_EQ(kv.value(s, r) - base, kv_value_offset(r, width, block_size)) << "row " << r;
  }
  const KvPoolShape pool{.kv_width = width, .block_size = block_size, .total_blocks = 5};
  EXPECT_EQ(pool.slots(), 20);
  EXPECT_EQ(pool.elements(), 240);
}

TEST(KvWriteLaunch, OneBlockPerRow) {
  const KvPoolShape pool{.kv_width = 512, .block_size = 16, .total_blocks = 10};
  const LaunchConfig c = kv_write_launch({.rows = 6, .pool = pool});
  EXPECT_EQ(c.grid_x, 6u);
  EXPECT_EQ(c.threads, 256u);
  EXPECT_EQ(kv_write_launch({.rows = 1, .pool = {.kv_width = 40, .block_size = 1}}).threads, 64u);
  EXPECT_TRUE(kv_write_launch({.rows = 0, .pool = pool}).empty());
  EXPECT_THROW(kv_write_launch({.rows = -1, .pool = pool}), std::invalid_argument);
  EXPECT_THROW(kv_write_launch({.rows = 1, .pool = {.kv_width = 0, .block_size = 16}}),
               std::invalid_argument);
  EXPECT_THROW(kv_write_launch({.rows = 1, .pool = {.kv_width = 8, .block_size = 0}}),
               std::invalid_argument);
  EXPECT_THROW(kv_write_launch({.rows = 1, .k_stride = 100, .v_stride = 4, .pool = pool}),
               std::invalid_argument);
}

TEST(KvProject, ValidatesTheShapeAndSizesTheScratch) {
  const KvProjectShape shape{.rows = 5,
                             .d_model = 64,
                             .q_dim = 64,
                             .n_kv_heads = 2,
                             .head_dim = 16,
                             .pool = {.kv_width = 32, .block_size = 4, .total_blocks = 3}};
  EXPECT_EQ(kv_project_scratch(shape), 5 * 2 * 32);
  KvProjectShape bad = shape;
  bad.pool.kv_width = 16;
  EXPECT_THROW(kv_project_scratch(bad), std::invalid_argument);
  bad = shape;
  bad.head_dim = 15;  // rotary needs an even head_dim
  bad.pool.kv_width = 30;
  EXPECT_THROW(kv_project_scratch(bad), std::invalid_argument);
  bad = shape;
  bad.pool.block_size = 0;
  EXPECT_THROW(kv_project_scratch(bad), std::invalid_argument);
}

template <typename T>
class KvWriteKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(KvWriteKernel, StorageTypes);

// Copies are exact, so the pool must equal the host layout bit for bit.
TYPED_TEST(KvWriteKernel, WritesRowsIntoTheirSlots) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(8);
  const KvPoolShape pool{.kv_width = 48, .block_size = 4, .total_blocks = 5};
  const std::int64_t rows = 5;
  const std::int64_t stride = 2 * pool.kv_width;  // K|V side by side, as kv_project has them
  const auto kv = testing::random_values<T>(static_cast<std::size_t>(rows * stride), rng);
  // Row 2 keeps no K/V (a probe); the others land in assorted pages and offsets.
  const std::vector<std::int32_t> slots = {13, 0, -1, 7, 19};
  const std::vector<std::int32_t> positions = {100, 3, 9, 42, 7};
  DeviceBuffer<T> dkv(testing::to_storage<T>(kv));
  DeviceBuffer<std::int32_t> dslots(slots);
  DeviceBuffer<std::int32_t> dpositions(positions);
  DeviceBuffer<T> dpool(
      testing::to_storage<T>(std::vector<float>(static_cast<std::size_t>(pool.elements()), 0.0f)));
  DeviceBuffer<std::int32_t> dpool_positions(
      std::vector<std::int32_t>(static_cast<std::size_t>(pool.slots()), -1));
  kv_write(dkv.get(), dkv.get() + pool.kv_width, dslots.get(), dpositions.get(), dpool.get(),
           dpool_positions.get(),
           {.rows = rows, .k_stride = stride, .v_stride = stride, .pool = pool});
  testing::synchronize();

  std::vector<float> expected(static_cast<std::size_t>(pool.elements()), 0.0f);
  std::vector<std::int32_t> expected_positions(static_cast<std::size_t>(pool.slots()), -1);
  for (std::size_t r = 0; r < slots.size(); ++r) {
    if (slots[r] < 0)
      continue;
    const auto row = kv.begin() + static_cast<std::ptrdiff_t>(r) * stride;
    std::copy(row, row + pool.kv_width,
              expected.begin() + kv_key_offset(slots[r], pool.kv_width, pool.block_size));
    std::copy(row + pool.kv_width, row + stride,
              expected.begin() + kv_value_offset(slots[r], pool.kv_width, pool.block_size));
    expected_positions[static_cast<std::size_t>(slots[r])] = positions[r];
  }
  EXPECT_EQ(testing::to_floats(dpool.download()), expected);
  EXPECT_EQ(dpool_positions.download(), expected_positions);
}

TYPED_TEST(KvWriteKernel, KvProjectMatchesTheCpuEngineKvOnly) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(21);
  const std::int64_t rows = 6;
  const std::int64_t d_model = 128;
  const std::int64_t n_kv_heads = 2;
  const std::int64_t head_dim = 32;
  const std::int64_t kv_width = n_kv_heads * head_dim;
  const std::int64_t q_dim = 4 * head_dim;
  const KvProjectShape shape{.rows = rows,
                             .d_model = d_model,
                             .q_dim = q_dim,
                             .n_kv_heads = n_kv_heads,
                             .head_dim = head_dim,
                             .pool = {.kv_width = kv_width, .block_size = 4, .total_blocks = 3}};
  const auto h = testing::random_values<T>(static_cast<std::size_t>(rows * d_model), rng);
  const auto w_qkv =
      testing::random_values<T>(static_cast<std::size_t>((q_dim + 2 * kv_width) * d_model), rng,
                                1.0f / std::sqrt(static_cast<float>(d_model)));
  const std::vector<std::int32_t> positions = {0, 1, 2, 5, 8, 13};
  const std::vector<std::int32_t> slots = {0, 1, 2, 3, 4, -1};

  // Reference: K and V in double from the same rounded inputs, then the engine's rotation.
  const std::vector<float> w_kv(w_qkv.begin() + q_dim * d_model, w_qkv.end());
  const std::vector<double> kv_exact =
      testing::gemm_reference(h, w_kv, rows, 2 * kv_width, d_model);
  std::vector<float> kv(kv_exact.begin(), kv_exact.end());
  const std::vector<float> inv_freq = engine::rotary_inv_freq(head_dim, 10000.0);
  testing::rotary_reference(kv, rows, n_kv_heads, head_dim, 2 * kv_width, positions, inv_freq);

  const CublasHandle handle;
  DeviceBuffer<T> dh(testing::to_storage<T>(h));
  DeviceBuffer<T> dw(testing::to_storage<T>(w_qkv));
  DeviceBuffer<std::int32_t> dpositions(positions);
  DeviceBuffer<float> dinv_freq(inv_freq);
  DeviceBuffer<std::int32_t> dslots(slots);
  DeviceBuffer<T> dscratch(static_cast<std::size_t>(kv_project_scratch(shape)));
  DeviceBuffer<T> dpool(testing::to_storage<T>(
      std::vector<float>(static_cast<std::size_t>(shape.pool.elements()), 0.0f)));
  DeviceBuffer<std::int32_t> dpool_positions(
      std::vector<std::int32_t>(static_cast<std::size_t>(shape.pool.slots()), -1));
  kv_project(handle, dh.get(), dw.get(), dpositions.get(), dinv_freq.get(), dslots.get(),
             dscratch.get(), dpool.get(), dpool_positions.get(), shape);
  testing::synchronize();
  const std::vector<float> pool = testing::to_floats(dpool.download());
  const std::vector<std::int32_t> pool_positions = dpool_positions.download();

  // K/V are O(1) (weights scaled by 1 / sqrt(d_model)); fp32: the GEMM's fp32 sums and the
  // rotation, 2e-5; fp16/bf16: the projection is rounded to T before the rotation and again
  // after it, so three times the storage rounding.
  const float tolerance = std::same_as<T, float> ? 2e-5f : 3.0f * testing::storage_tolerance<T>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t slot = slots[static_cast<std::size_t>(r)];
    if (slot < 0)
      continue;
    EXPECT_EQ(pool_positions[static_cast<std::size_t>(slot)],
              positions[static_cast<std::size_t>(r)]);
    for (std::int64_t c = 0; c < kv_width; ++c) {
      const float ek = kv[static_cast<std::size_t>(r * 2 * kv_width + c)];
      const float ev = kv[static_cast<std::size_t>(r * 2 * kv_width + kv_width + c)];
      const float ak =
          pool[static_cast<std::size_t>(kv_key_offset(slot, kv_width, shape.pool.block_size) + c)];
      const float av = pool[static_cast<std::size_t>(
          kv_value_offset(slot, kv_width, shape.pool.block_size) + c)];
      ASSERT_LE(std::abs(ak - ek), tolerance * std::max(1.0f, std::abs(ek)))
          << "K " << r << "," << c;
      ASSERT_LE(std::abs(av - ev), tolerance * std::max(1.0f, std::abs(ev)))
          << "V " << r << "," << c;
    }
  }
}

}  // namespace
}  // namespace exitsim::kernels
