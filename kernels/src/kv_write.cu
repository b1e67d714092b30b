#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/kv_write.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_max_threads = 256;

template <typename T>
__global__ void kv_write_kernel(const T* __restrict__ k, const T* __restrict__ v,
                                const std::int32_t* __restrict__ slots,
                                const std::int32_t* __restrict__ positions, T* __restrict__ pool,
                                std::int32_t* __restrict__ pool_positions, int kv_width,
                                long long k_stride, long long v_stride, long long block_size,
                                long long total_slots) {
  const long long row = blockIdx.x;
  const long long slot = slots[row];
  if (slot < 0 || slot >= total_slots)
    return;
  T* key = pool + kv_key_offset(slot, kv_width, block_size);
  T* value = pool + kv_value_offset(slot, kv_width, block_size);
  for (int i = threadIdx.x; i < kv_width; i += blockDim.x) {
    key[i] = k[row * k_stride + i];
    value[i] = v[row * v_stride + i];
  }
  if (threadIdx.x == 0)
    pool_positions[slot] = positions[row];
}

}  // namespace

LaunchConfig kv_write_launch(const KvWriteShape& shape) {
  constexpr const char* name = "kv_write";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(shape.pool.kv_width > 0 && detail::fits_int(shape.pool.kv_width), name,
                  "kv_width out of range");
  detail::require(shape.pool.block_size > 0 && shape.pool.total_blocks >= 0, name,
                  "bad pool shape");
  detail::require(shape.k_stride == 0 || shape.k_stride >= shape.pool.kv_width, name,
                  "k_stride shorter than a row");
  detail::require(shape.v_stride == 0 || shape.v_stride >= shape.pool.kv_width, name,
                  "v_stride shorter than a row");
  LaunchConfig config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows);
  config.threads = detail::threads_for(shape.pool.kv_width, k_max_threads);
  return config;
}

template <StorageType T>
void kv_write(const T* k, const T* v, const std::int32_t* slots, const std::int32_t* positions,
              T* pool, std::int32_t* pool_positions, const KvWriteShape& shape,
              cudaStream_t stream) {
  const LaunchConfig config = kv_write_launch(shape);
  if (config.empty())
    return;
  const std::int64_t width = shape.pool.kv_width;
  kv_write_kernel<T><<<config.grid_x, config.threads, 0, stream>>>(
      k, v, slots, positions, pool, pool_positions, static_cast<int>(width),
      shape.k_stride == 0 ? width : shape.k_stride, shape.v_stride == 0 ? width : shape.v_stride,
      shape.pool.block_size, shape.pool.slots());
  check_cuda(cudaGetLastError(), "kv_write launch");
}

#define EXITSIM_KV_WRITE(T)                                                                   \
  template void kv_write<T>(const T*, const T*, const std::int32_t*, const std::int32_t*, T*, \
                            std::int32_t*, const KvWriteShape&, cudaStream_t);
EXITSIM_KV_WRITE(float)
EXITSIM_KV_WRITE(__half)
EXITSIM_KV_WRITE(__nv_bfloat16)
#undef EXITSIM_KV_WRITE

}  // namespace exitsim::kernels
