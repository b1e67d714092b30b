#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/lora.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_max_threads = 256;
constexpr std::int64_t k_max_rank = 4096;

template <typename T, typename Out>
__global__ void lora_kernel(const T* x, Out* y, LoraAdapters<T> adapters, int in, int out,
                            long long x_stride, long long y_stride) {
  extern __shared__ float down[];
  const long long row = blockIdx.x;
  const int a = adapters.adapter[row];
  // The whole block leaves together, before any barrier.
  if (a < 0)
    return;
  const int rank = adapters.rank[a];
  if (rank <= 0)
    return;
  const T* lora_a = adapters.a + adapters.a_offset[a];
  const T* lora_b = adapters.b + adapters.b_offset[a];
  const T* in_row = x + row * x_stride;
  const int lane = static_cast<int>(threadIdx.x) % device::k_warp;
  const int warp = static_cast<int>(threadIdx.x) / device::k_warp;
  const int warps = static_cast<int>(blockDim.x) / device::k_warp;
  // down = A x: a warp per rank row.
  for (int k = warp; k < rank; k += warps) {
    float sum = 0.0f;
    for (int j = lane; j < in; j += device::k_warp)
      sum += device::to_float(lora_a[static_cast<long long>(k) * in + j]) *
             device::to_float(in_row[j]);
    sum = device::warp_sum(sum);
    if (lane == 0)
      down[k] = sum;
  }
  __syncthreads();
  // y += B down: a thread per output.
  Out* out_row = y + row * y_stride;
  for (int i = static_cast<int>(threadIdx.x); i < out; i += static_cast<int>(blockDim.x)) {
    float sum = 0.0f;
    for (int k = 0; k < rank; ++k)
      sum += device::to_float(lora_b[static_cast<long long>(i) * rank + k]) * down[k];
    out_row[i] = device::from_float<Out>(device::to_float(out_row[i]) + sum);
  }
}

}  // namespace

LaunchConfig lora_launch(const LoraShape& shape) {
  constexpr const char* name = "lora";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(detail::fits_int(shape.in) && detail::fits_int(shape.out), name,
                  "in and out must be in [0, INT_MAX]");
  detail::require(shape.max_rank >= 0 && shape.max_rank <= k_max_rank, name,
                  "max_rank must be in [0, 4096]");
  detail::require(shape.x_stride == 0 || shape.x_stride >= shape.in, name,
                  "x_stride shorter than a row");
  detail::require(shape.y_stride == 0 || shape.y_stride >= shape.out, name,
                  "y_stride shorter than a row");
  LaunchConfig config;
  if (shape.max_rank == 0 || shape.in == 0 || shape.out == 0)
    return config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows);
  config.threads = detail::threads_for(shape.in > shape.out ? shape.in : shape.out, k_max_threads);
  config.shared_bytes = static_cast<std::size_t>(shape.max_rank) * sizeof(float);
  return config;
}

template <StorageType T, StorageType Out>
void lora_add(const T* x, Out* y, const LoraAdapters<T>& adapters, const LoraShape& shape,
              cudaStream_t stream) {
  const LaunchConfig config = lora_launch(shape);
  if (config.empty())
    return;
  const long long x_stride = shape.x_stride == 0 ? shape.in : shape.x_stride;
  const long long y_stride = shape.y_stride == 0 ? shape.out : shape.y_stride;
  lora_kernel<T, Out><<<config.grid_x, config.threads, config.shared_bytes, stream>>>(
      x, y, adapters, static_cast<int>(shape.in), static_cast<int>(shape.out), x_stride, y_stride);
  check_cuda(cudaGetLastError(), "lora launch");
}

#define EXITSIM_LORA(T, Out)                                                               \
  template void lora_add<T, Out>(const T*, Out*, const LoraAdapters<T>&, const LoraShape&, \
                                 cudaStream_t);
EXITSIM_LORA(float, float)
EXITSIM_LORA(__half, __half)
EXITSIM_LORA(__half, float)
EXITSIM_LORA(__nv_bfloat16, __nv_bfloat16)
EXITSIM_LORA(__nv_bfloat16, float)
#undef EXITSIM_LORA

}  // namespace exitsim::kernels
