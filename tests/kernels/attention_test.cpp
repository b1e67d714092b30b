#include "exitsim/kernels/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/engine/kv_cache.hpp"
#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;
using testing::QueryRow;

AttentionShape small_shape() {
  return {.rows = 3,
          .n_heads = 8,
          .n_kv_heads = 2,
          .head_dim = 64,
          .streams = 2,
          .max_blocks = 4,
          .pool = {.kv_width = 128, .block_size = 16, .total_blocks = 8}};
}

TEST(AttentionLaunch, OneBlockPerRowAndHead) {
  const LaunchConfig c = attention_launch(small_shape());
  EXPECT_EQ(c.grid_x, 24u);
  EXPECT_EQ(c.threads, static_cast<std::uint32_t>(k_attention_warps * 32));
  // Per warp: a head_dim accumulator plus its running max and sum.
  EXPECT_EQ(c.shared_bytes, static_cast<std::size_t>(k_attention_warps) * (64 + 2) * sizeof(float));
  AttentionShape none = small_shape();
  none.rows = 0;
  EXPECT_TRUE(attention_launch(none).empty());
  EXPECT_NO_THROW(attention(AttentionArgs<float>{}, none));
}

TEST(AttentionLaunch, RejectsBadShapes) {
  auto bad = [](auto change) {
    AttentionShape s = small_shape();
    change(s);
    return s;
  };
  const std::vector<AttentionShape> shapes = {
      bad([](AttentionShape& s) { s.rows = -1; }),
      bad([](AttentionShape& s) { s.n_kv_heads = 3; }),  // 8 heads do not group by 3
      bad([](AttentionShape& s) { s.n_kv_heads = 0; }),
      bad([](AttentionShape& s) { s.head_dim = 0; }),
      bad([](AttentionShape& s) {
        s.head_dim = 512;
        s.pool.kv_width = 1024;
      }),
      bad([](AttentionShape& s) { s.pool.kv_width = 64; }),  // not n_kv_heads * head_dim
      bad([](AttentionShape& s) { s.pool.block_size = 0; }),
      bad([](AttentionShape& s) { s.q_stride = 100; }),
      bad([](AttentionShape& s) { s.self_stride = 100; }),
      bad([](AttentionShape& s) { s.max_blocks = -1; }),
  };
  for (const AttentionShape& s : shapes) {
    EXPECT_THROW(attention_launch(s), std::invalid_argument);
    EXPECT_THROW(attention(AttentionArgs<float>{}, s), std::invalid_argument);
  }
}

// Streams of K/V held twice: in an engine::KvCache, which the reference reads as CpuModel
// does, and in the kernels' paged pool, with pages handed out in shuffled order so the block
// table matters.
struct Scenario {
  Scenario(const KvPoolShape& pool_shape, std::int64_t blocks_per_stream)
      : kv(pool_shape.kv_width, pool_shape.block_size, pool_shape.total_blocks),
        max_blocks(blocks_per_stream),
        shape(pool_shape) {}

  engine::KvCache kv;
  std::vector<float> pool;
  std::vector<std::int32_t> pool_positions;
  std::vector<std::int32_t> block_tables;
  std::vector<std::int32_t> stream_rows;
  std::vector<std::vector<std::int32_t>> positions;  // per stream
  std::int64_t max_blocks = 0;
  KvPoolShape shape;
};

template <typename T>
Scenario make_scenario(const std::vector<std::int64_t>& rows_per_stream, std::int64_t kv_width,
                       std::int64_t block_size, std::mt19937& rng) {
  std::int64_t blocks = 0;
  std::int64_t max_blocks = 1;
  for (const std::int64_t rows : rows_per_stream) {
    const std::int64_t b = (rows + block_size - 1) / block_size;
    blocks += b;
    max_blocks = std::max(max_blocks, b);
  }
  const std::int64_t total_blocks = blocks + 3;  // spare pages stay unused
  Scenario s({.kv_width = kv_width, .block_size = block_size, .total_blocks = total_blocks},
             max_blocks);
  s.pool.assign(static_cast<std::size_t>(s.shape.elements()), 0.0f);
  s.pool_positions.assign(static_cast<std::size_t>(s.shape.slots()), -1);
  s.block_tables.assign(rows_per_stream.size() * static_cast<std::size_t>(max_blocks), -1);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(total_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::size_t next_page = 0;
  std::uniform_int_distribution<std::int32_t> gap(1, 3);  // skip_kv leaves holes in positions
  for (std::size_t st = 0; st < rows_per_stream.size(); ++st) {
    const int id = s.kv.open_stream();
    std::vector<std::int32_t> positions;
    std::int32_t position = gap(rng) - 1;
    for (std::int64_t row = 0; row < rows_per_stream[st]; ++row) {
      if (row % block_size == 0) {
        s.block_tables[st * static_cast<std::size_t>(max_blocks) +
                       static_cast<std::size_t>(row / block_size)] = pages[next_page++];
      }
      const std::vector<float> k =
          testing::random_values<T>(static_cast<std::size_t>(kv_width), rng);
      const std::vector<float> v =
          testing::random_values<T>(static_cast<std::size_t>(kv_width), rng);
      s.kv.append(id, position, k, v);
      const std::int64_t slot =
          std::int64_t{s.block_tables[st * static_cast<std::size_t>(max_blocks) +
                                      static_cast<std::size_t>(row / block_size)]} *
              block_size +
          row % block_size;
      std::copy(k.begin(), k.end(), s.pool.begin() + kv_key_offset(slot, kv_width, block_size));
      std::copy(v.begin(), v.end(), s.pool.begin() + kv_value_offset(slot, kv_width, block_size));
      s.pool_positions[static_cast<std::size_t>(slot)] = position;
      positions.push_back(position);
      position += gap(rng);
    }
    s.stream_rows.push_back(static_cast<std::int32_t>(rows_per_stream[st]));
    s.positions.push_back(std::move(positions));
  }
  return s;
}

struct Case {
  std::string name;
  std::int64_t n_heads;
  std::int64_t n_kv_heads;
  std::int64_t head_dim;
  std::int64_t block_size;
  std::vector<std::int64_t> rows_per_stream;
  std::vector<std::int64_t> queries_per_stream;  // the stream's last rows: a chunk, or a decode
  bool extra_rows;  // probes, rows without a stream, rows before a stream's first key
  bool fused;       // q, k, v side by side in one row, as a fused projection writes them
};

template <typename T>
class AttentionKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(AttentionKernel, StorageTypes);

TYPED_TEST(AttentionKernel, MatchesTheCpuEngine) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  // Outputs are weighted means of O(1) values. fp32: 2e-5 absolute (1e-5 relative above 1):
  // the online softmax in fp32 against the CPU's double. fp16/bf16: twice the rounding of T,
  // since the inputs are exact in T and only the fp32 arithmetic and the final store round.
  const float tolerance = 2.0f * testing::storage_tolerance<T>();
  const std::vector<Case> cases = {
      {"one decode row", 1, 1, 32, 16, {1}, {1}, false, false},
      {"gqa prefill chunks and decodes", 8, 2, 64, 16, {40, 17, 1, 64}, {12, 1, 1, 5}, true, false},
      {"head_dim 128, mqa, fused", 4, 1, 128, 8, {29, 300}, {3, 1}, true, true},
      {"mha, page of one row", 2, 2, 32, 1, {5, 9}, {5, 2}, true, false},
      {"head_dim 96 not a power of two", 6, 3, 96, 32, {70}, {70}, true, true},
  };
  std::mt19937 rng(2024);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::int64_t kv_width = c.n_kv_heads * c.head_dim;
    const std::int64_t q_dim = c.n_heads * c.head_dim;
    Scenario s = make_scenario<T>(c.rows_per_stream, kv_width, c.block_size, rng);

    // Query rows of several sequences interleaved, as a mixed batch has them.
    std::vector<QueryRow> rows;
    for (std::size_t st = 0; st < c.queries_per_stream.size(); ++st) {
      const auto& p = s.positions[st];
      for (std::int64_t i = c.queries_per_stream[st]; i > 0; --i)
        rows.push_back({.position = p[p.size() - static_cast<std::size_t>(i)],
                        .stream = static_cast<int>(st)});
    }
    std::shuffle(rows.begin(), rows.end(), rng);
    if (c.extra_rows) {
      const auto& p = s.positions[0];
      rows.push_back({.position = p.back() + 1, .stream = 0, .probe = true});
      rows.push_back({.position = 3, .stream = -1, .probe = true});  // only its own key
      rows.push_back({.position = p.back(), .stream = -1});          // no keys: zeros
      rows.push_back({.position = p.front() - 1, .stream = 0});      // before the first key
      if (p.size() > 2)
        rows.push_back({.position = p[p.size() / 2] + 1, .stream = 0});  // in a gap, maybe
    }
    const auto n = static_cast<std::int64_t>(rows.size());
    const std::int64_t stride = c.fused ? q_dim + 2 * kv_width : 0;

    std::vector<float> q = testing::random_values<T>(static_cast<std::size_t>(n * q_dim), rng);
    std::vector<float> self_k =
        testing::random_values<T>(static_cast<std::size_t>(n * kv_width), rng);
    std::vector<float> self_v =
        testing::random_values<T>(static_cast<std::size_t>(n * kv_width), rng);
    const std::vector<float> expected = testing::attention_reference(
        q, self_k, self_v, rows, s.kv,
        {.n_heads = c.n_heads, .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim});

    // The device copy: separate buffers, or one fused q|k|v buffer.
    std::vector<float> qkv;
    if (c.fused) {
      for (std::int64_t r = 0; r < n; ++r) {
        auto take = [&](const std::vector<float>& m, std::int64_t width) {
          qkv.insert(qkv.end(), m.begin() + r * width, m.begin() + (r + 1) * width);
        };
        take(q, q_dim);
        take(self_k, kv_width);
        take(self_v, kv_width);
      }
    }
    DeviceBuffer<T> dq(testing::to_storage<T>(c.fused ? qkv : q));
    DeviceBuffer<T> dk(testing::to_storage<T>(self_k));
    DeviceBuffer<T> dv(testing::to_storage<T>(self_v));
    DeviceBuffer<T> dout(static_cast<std::size_t>(n * q_dim));
    DeviceBuffer<T> dpool(testing::to_storage<T>(s.pool));
    DeviceBuffer<std::int32_t> dpool_positions(s.pool_positions);
    DeviceBuffer<std::int32_t> dtables(s.block_tables);
    DeviceBuffer<std::int32_t> dstream_rows(s.stream_rows);
    std::vector<std::int32_t> row_positions, row_streams, row_self;
    for (const QueryRow& r : rows) {
      row_positions.push_back(r.position);
      row_streams.push_back(r.stream);
      row_self.push_back(r.probe ? 1 : 0);
    }
    DeviceBuffer<std::int32_t> dpositions(row_positions);
    DeviceBuffer<std::int32_t> dstreams(row_streams);
    DeviceBuffer<std::int32_t> dself(row_self);

    AttentionArgs<T> args;
    args.q = dq.get();
    args.out = dout.get();
    args.pool = dpool.get();
    args.pool_positions = dpool_positions.get();
    args.block_tables = dtables.get();
    args.stream_rows = dstream_rows.get();
    args.row_positions = dpositions.get();
    args.row_streams = dstreams.get();
    args.row_self = dself.get();
    args.self_k = c.fused ? dq.get() + q_dim : dk.get();
    args.self_v = c.fused ? dq.get() + q_dim + kv_width : dv.get();
    const AttentionShape shape{.rows = n,
                               .n_heads = c.n_heads,
                               .n_kv_heads = c.n_kv_heads,
                               .head_dim = c.head_dim,
                               .q_stride = stride,
                               .self_stride = stride,
                               .streams = static_cast<std::int64_t>(s.stream_rows.size()),
                               .max_blocks = s.max_blocks,
                               .pool = s.shape};
    attention(args, shape);
    testing::synchronize();
    const std::vector<float> actual = testing::to_floats(dout.download());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_LE(std::abs(actual[i] - expected[i]),
                tolerance * std::max(1.0f, std::abs(expected[i])))
          << "row " << i / static_cast<std::size_t>(q_dim) << " element "
          << i % static_cast<std::size_t>(q_dim);
    }
  }
}

}  // namespace
}  // namespace exitsim::kernels
