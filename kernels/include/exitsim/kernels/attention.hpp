#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/kv_write.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

struct AttentionShape {
  std::int64_t rows = 0;  // query rows: prefill-chunk tokens, decode tokens, or a mix
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;   // divides n_heads (GQA)
  std::int64_t head_dim = 0;     // at most k_attention_max_head_dim
  std::int64_t q_stride = 0;     // elements between query rows; 0: n_heads * head_dim
  std::int64_t self_stride = 0;  // elements between rows of self_k / self_v; 0: kv width
  std::int64_t streams = 0;      // rows of the block table
  std::int64_t max_blocks = 0;   // entries per block-table row
  KvPoolShape pool;              // pool.kv_width must be n_kv_heads * head_dim
};

inline constexpr std::int64_t k_attention_max_head_dim = 256;
inline constexpr std::int64_t k_attention_warps = 4;

// One block of k_attention_warps warps per (query row, head), rows * n_heads blocks; shared
// memory holds each warp's running max, sum and accumulator for the final merge. Throws
// std::invalid_argument for a bad shape.
LaunchConfig attention_launch(const AttentionShape& shape);

// Device pointers of one attention call. A *stream* is the K/V of one sequence at one layer, as in
// engine::KvCache: its rows, in ascending position, live in the pool slots
// block_tables[s * max_blocks + row / block_size] * block_size + row % block_size.
template <StorageType T>
struct AttentionArgs {
  const T* q = nullptr;  // [rows, n_heads, head_dim], rows q_stride apart
  T* out = nullptr;      // [rows, n_heads * head_dim], contiguous
  const T* pool = nullptr;
  const std::int32_t* pool_positions = nullptr;  // [pool.slots()]
  const std::int32_t* block_tables = nullptr;    // [streams, max_blocks]
  const std::int32_t* stream_rows = nullptr;     // [streams] rows each stream holds
  const std::int32_t* row_positions = nullptr;   // [rows] the query's position
  const std::int32_t* row_streams = nullptr;     // [rows] stream it reads; < 0: none
  // Optional, for probes (engine::LayerRow::probe): a row with row_self[r] != 0 also attends to
  // its own key and value self_k[r], self_v[r], which are not in the pool. nullptr: no row does.
  const std::int32_t* row_self = nullptr;
  const T* self_k = nullptr;
  const T* self_v = nullptr;
};

// out[r, h] = softmax(q[r, h] . K^T / sqrt(head_dim)) V over the keys of row r's stream at
// positions <= row_positions[r] (plus its own key for a probe), with K/V head h / (n_heads /
// n_kv_heads): engine::CpuModel's attention. Scores and the online softmax run in fp32; a row
// with no keys gets zeros, as on the CPU.
template <StorageType T>
void attention(const AttentionArgs<T>& args, const AttentionShape& shape,
               cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
