#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/rotary.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_max_threads = 256;

template <typename T>
__global__ void rotary_kernel(T* x, const std::int32_t* __restrict__ positions,
                              const float* __restrict__ table, int heads, int head_dim,
                              long long row_stride) {
  extern __shared__ float inv_freq[];
  const int half = head_dim / 2;
  // The host computed the table (engine::rotary_inv_freq), so the CPU and GPU angles agree.
  for (int j = threadIdx.x; j < half; j += blockDim.x)
    inv_freq[j] = table[j];
  __syncthreads();
  const long long row = blockIdx.x;
  const float position = static_cast<float>(positions[row]);
  T* base = x + row * row_stride;
  for (int i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int h = i / half;
    const int j = i % half;
    float s = 0.0f;
    float c = 0.0f;
    sincosf(position * inv_freq[j], &s, &c);
    T* a = base + h * head_dim + j;
    T* b = a + half;
    const float x1 = device::to_float(*a);
    const float x2 = device::to_float(*b);
    *a = device::from_float<T>(x1 * c - x2 * s);
    *b = device::from_float<T>(x2 * c + x1 * s);
  }
}

}  // namespace

LaunchConfig rotary_launch(const RotaryShape& shape) {
  constexpr const char* name = "rotary";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(shape.heads > 0 && shape.head_dim > 0, name,
                  "heads and head_dim must be positive");
  detail::require(shape.head_dim % 2 == 0, name, "head_dim must be even");
  detail::require(detail::fits_int(shape.heads * shape.head_dim), name, "row too wide");
  detail::require(shape.row_stride == 0 || shape.row_stride >= shape.heads * shape.head_dim, name,
                  "row_stride shorter than a row");
  LaunchConfig config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows);
  config.threads = detail::threads_for(shape.heads * shape.head_dim / 2, k_max_threads);
  config.shared_bytes = static_cast<std::size_t>(shape.head_dim / 2) * sizeof(float);
  return config;
}

template <StorageType T>
void rotary(T* x, const std::int32_t* positions, const float* inv_freq, const RotaryShape& shape,
            cudaStream_t stream) {
  const LaunchConfig config = rotary_launch(shape);
  if (config.empty())
    return;
  detail::require(inv_freq != nullptr, "rotary", "no frequency table");
  const std::int64_t stride =
      shape.row_stride == 0 ? shape.heads * shape.head_dim : shape.row_stride;
  rotary_kernel<T><<<config.grid_x, config.threads, config.shared_bytes, stream>>>(
      x, positions, inv_freq, static_cast<int>(shape.heads), static_cast<int>(shape.head_dim),
      static_cast<long long>(stride));
  check_cuda(cudaGetLastError(), "rotary launch");
}

template void rotary<float>(float*, const std::int32_t*, const float*, const RotaryShape&,
                            cudaStream_t);
template void rotary<__half>(__half*, const std::int32_t*, const float*, const RotaryShape&,
                             cudaStream_t);
template void rotary<__nv_bfloat16>(__nv_bfloat16*, const std::int32_t*, const float*,
                                    const RotaryShape&, cudaStream_t);

}  // namespace exitsim::kernels
