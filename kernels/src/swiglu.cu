#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/swiglu.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_threads = 256;
// Enough blocks to fill any current GPU several times over; the loop covers the rest.
constexpr std::int64_t k_max_blocks = 65536;

template <typename T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, long long rows, long long width,
                              long long in_stride, long long out_stride) {
  const long long total = rows * width;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / width;
    const long long c = i % width;
    const float g = device::to_float(gate[r * in_stride + c]);
    const float u = device::to_float(up[r * in_stride + c]);
    out[r * out_stride + c] = device::from_float<T>(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

LaunchConfig swiglu_launch(const SwigluShape& shape) {
  constexpr const char* name = "swiglu";
  detail::require(shape.rows >= 0 && shape.width >= 0, name, "negative shape");
  detail::require(shape.in_stride == 0 || shape.in_stride >= shape.width, name,
                  "in_stride shorter than a row");
  detail::require(shape.out_stride == 0 || shape.out_stride >= shape.width, name,
                  "out_stride shorter than a row");
  detail::require(shape.width == 0 || shape.rows <= INT64_MAX / shape.width, name,
                  "shape too large");
  LaunchConfig config;
  const std::int64_t blocks = detail::ceil_div(shape.rows * shape.width, k_threads);
  config.grid_x = static_cast<std::uint32_t>(blocks < k_max_blocks ? blocks : k_max_blocks);
  config.threads = static_cast<std::uint32_t>(k_threads);
  return config;
}

template <StorageType T>
void swiglu(const T* gate, const T* up, T* out, const SwigluShape& shape, cudaStream_t stream) {
  const LaunchConfig config = swiglu_launch(shape);
  if (config.empty())
    return;
  const long long in_stride = shape.in_stride == 0 ? shape.width : shape.in_stride;
  const long long out_stride = shape.out_stride == 0 ? shape.width : shape.out_stride;
  swiglu_kernel<T><<<config.grid_x, config.threads, 0, stream>>>(
      gate, up, out, shape.rows, shape.width, in_stride, out_stride);
  check_cuda(cudaGetLastError(), "swiglu launch");
}

template void swiglu<float>(const float*, const float*, float*, const SwigluShape&, cudaStream_t);
template void swiglu<__half>(const __half*, const __half*, __half*, const SwigluShape&,
                             cudaStream_t);
template void swiglu<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                    const SwigluShape&, cudaStream_t);

}  // namespace exitsim::kernels
