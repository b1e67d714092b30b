#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/launch.hpp"

namespace exitsim::kernels {

// The paged K/V pool, laid out as engine::KvCache lays out its storage: block b holds
// block_size rows of K (kv_width = n_kv_heads * head_dim values each) followed by block_size
// rows of V. A *slot* names one row of the pool: block * block_size + row_in_block. Next to the
// values, an int32 per slot holds the position of the token stored there (KvCache keeps the same
// per stream), which is what attention masks on.
struct KvPoolShape {
  std::int64_t kv_width = 0;
  std::int64_t block_size = 0;
  std::int64_t total_blocks = 0;

  std::int64_t slots() const { return total_blocks * block_size; }
  std::int64_t elements() const { return slots() * kv_width * 2; }
};

// Offsets, in elements, of a slot's K row and V row in the pool.
__host__ __device__ constexpr std::int64_t kv_key_offset(std::int64_t slot, std::int64_t kv_width,
                                                         std::int64_t block_size) {
  return ((slot / block_size) * 2 * block_size + slot % block_size) * kv_width;
}
__host__ __device__ constexpr std::int64_t kv_value_offset(std::int64_t slot, std::int64_t kv_width,
                                                           std::int64_t block_size) {
  return kv_key_offset(slot, kv_width, block_size) + block_size * kv_width;
}

struct KvWriteShape {
  std::int64_t rows = 0;      // rows to write
  std::int64_t k_stride = 0;  // elements between rows of k; 0: kv_width
  std::int64_t v_stride = 0;  // elements between rows of v; 0: kv_width
  KvPoolShape pool;
};

// One block per row, threads over kv_width. Throws std::invalid_argument for a bad shape.
LaunchConfig kv_write_launch(const KvWriteShape& shape);

// For each row r with slots[r] in [0, pool.slots()): copies k[r] and v[r] into that slot and
// records positions[r] for it. Rows with a negative slot are skipped (tokens whose K/V is not
// kept: probes, shared-KV reuse), as are out-of-range slots, which cannot be checked on the host.
// `slots` and `positions` are int32 device arrays of `rows` entries; the host allocates slots as
// KvCache::append allocates rows.
template <StorageType T>
void kv_write(const T* k, const T* v, const std::int32_t* slots, const std::int32_t* positions,
              T* pool, std::int32_t* pool_positions, const KvWriteShape& shape,
              cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
