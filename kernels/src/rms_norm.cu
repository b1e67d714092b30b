#include <climits>
#include <stdexcept>

#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/rms_norm.hpp"

namespace exitsim::kernels {
namespace {

constexpr int k_max_threads = 256;

// One block per row: threads stride over the row accumulating squares; the block reduces them.
template <typename In, typename Out>
__global__ void rms_norm_kernel(const In* x, const float* __restrict__ weight, Out* y, int dim,
                                float eps) {
  __shared__ float partial[k_max_threads / device::k_warp];
  const long long row = blockIdx.x;
  const In* in = x + row * dim;
  Out* out = y + row * dim;

  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = device::to_float(in[i]);
    sum += v * v;
  }
  const float inv_rms = rsqrtf(device::block_sum(sum, partial) / static_cast<float>(dim) + eps);
  // x and y may alias: every read of this row happened before block_sum's barriers.
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    out[i] = device::from_float<Out>(device::to_float(in[i]) * inv_rms * weight[i]);
}

}  // namespace

template <StorageType In, StorageType Out>
void rms_norm(const In* x, const float* weight, Out* y, std::int64_t rows, std::int64_t dim,
              float eps, cudaStream_t stream) {
  if (rows < 0 || dim < 0 || rows > INT_MAX || dim > INT_MAX) {
    throw std::invalid_argument("rms_norm: shape out of range");
  }
  if (!(eps >= 0.0f))
    throw std::invalid_argument("rms_norm: eps must be non-negative");
  if (rows == 0 || dim == 0)
    return;
  // Enough threads to cover the row once when it is short, whole warps so shuffles see full masks.
  const std::int64_t wanted = (dim + device::k_warp - 1) / device::k_warp * device::k_warp;
  const int threads = static_cast<int>(wanted < k_max_threads ? wanted : k_max_threads);
  rms_norm_kernel<In, Out><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
      x, weight, y, static_cast<int>(dim), eps);
  check_cuda(cudaGetLastError(), "rms_norm launch");
}

#define EXITSIM_RMS_NORM(In, Out)                                                            \
  template void rms_norm<In, Out>(const In*, const float*, Out*, std::int64_t, std::int64_t, \
                                  float, cudaStream_t);
EXITSIM_RMS_NORM(float, float)
EXITSIM_RMS_NORM(float, __half)
EXITSIM_RMS_NORM(float, __nv_bfloat16)
EXITSIM_RMS_NORM(__half, __half)
EXITSIM_RMS_NORM(__nv_bfloat16, __nv_bfloat16)
#undef EXITSIM_RMS_NORM

}  // namespace exitsim::kernels
