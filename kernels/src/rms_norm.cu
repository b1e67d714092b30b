#include <climits>
#include <stdexcept>

#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/rms_norm.hpp"

namespace exitsim::kernels {
namespace {

constexpr int k_warp = 32;
constexpr int k_max_threads = 256;

__device__ float warp_sum(float v) {
  for (int offset = k_warp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// One block per row: threads stride over the row accumulating squares, warps reduce with
// shuffles, and the first warp reduces the per-warp partial sums.
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ weight, float* y, int dim,
                                float eps) {
  __shared__ float partial[k_max_threads / k_warp];
  __shared__ float inv_rms;
  const long long row = blockIdx.x;
  const float* in = x + row * dim;
  float* out = y + row * dim;

  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    sum += in[i] * in[i];
  sum = warp_sum(sum);
  const int lane = threadIdx.x % k_warp;
  const int warp = threadIdx.x / k_warp;
  if (lane == 0)
    partial[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + k_warp - 1) / k_warp;
    float total = lane < warps ? partial[lane] : 0.0f;
    total = warp_sum(total);
    if (lane == 0)
      inv_rms = rsqrtf(total / static_cast<float>(dim) + eps);
  }
  __syncthreads();
  // x and y may alias: every read of this row happened before the barrier above.
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    out[i] = in[i] * inv_rms * weight[i];
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t dim,
              float eps, cudaStream_t stream) {
  if (rows < 0 || dim < 0 || rows > INT_MAX || dim > INT_MAX) {
    throw std::invalid_argument("rms_norm: shape out of range");
  }
  if (!(eps >= 0.0f))
    throw std::invalid_argument("rms_norm: eps must be non-negative");
  if (rows == 0 || dim == 0)
    return;
  // Enough threads to cover the row once when it is short, whole warps so shuffles see full masks.
  const std::int64_t wanted = (dim + k_warp - 1) / k_warp * k_warp;
  const int threads = static_cast<int>(wanted < k_max_threads ? wanted : k_max_threads);
  rms_norm_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, weight, y,
                                                                       static_cast<int>(dim), eps);
  check_cuda(cudaGetLastError(), "rms_norm launch");
}

}  // namespace exitsim::kernels
