#include <cmath>

#include "device_util.cuh"
#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/lm_head.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

constexpr std::int64_t k_top2_threads = 1024;
constexpr std::int64_t k_router_threads = 256;
constexpr int k_max_warps = 32;

// The best logit, its index, and the best logit at any other index. Merging two keeps the
// better best (lower index on ties) and the largest of everything else, so ties give a zero
// margin as on the CPU.
struct Top2 {
  float best;
  int index;
  float second;
};

__device__ Top2 merge(Top2 a, Top2 b) {
  const bool a_wins =
      a.best > b.best || (a.best == b.best && a.index >= 0 && (b.index < 0 || a.index < b.index));
  const Top2& w = a_wins ? a : b;
  const Top2& o = a_wins ? b : a;
  return {w.best, w.index, fmaxf(fmaxf(w.second, o.second), o.best)};
}

__device__ Top2 warp_merge(Top2 v) {
  for (int offset = device::k_warp / 2; offset > 0; offset /= 2) {
    const Top2 other{__shfl_xor_sync(device::k_full_mask, v.best, offset),
                     __shfl_xor_sync(device::k_full_mask, v.index, offset),
                     __shfl_xor_sync(device::k_full_mask, v.second, offset)};
    v = merge(v, other);
  }
  return v;
}

__global__ void top2_kernel(const float* logits, int vocab, long long stride,
                            std::int32_t* top1_index, float* top1_prob, float* margin) {
  __shared__ Top2 partial[k_max_warps];
  __shared__ float scratch[k_max_warps];
  const long long row = blockIdx.x;
  const float* l = logits + row * stride;
  const int lane = static_cast<int>(threadIdx.x) % device::k_warp;
  const int warp = static_cast<int>(threadIdx.x) / device::k_warp;
  const int warps = static_cast<int>(blockDim.x) / device::k_warp;

  // index -1 marks "nothing seen", so an all -inf row is recognisable after the merge.
  Top2 t{-INFINITY, -1, -INFINITY};
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += static_cast<int>(blockDim.x))
    t = merge(t, Top2{l[i], l[i] > -INFINITY ? i : -1, -INFINITY});
  t = warp_merge(t);
  if (lane == 0)
    partial[warp] = t;
  __syncthreads();
  t = lane < warps ? partial[lane] : Top2{-INFINITY, -1, -INFINITY};
  t = warp_merge(t);  // every warp computes the same block-wide result

  float sum = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += static_cast<int>(blockDim.x))
    sum += expf(l[i] - t.best);
  sum = device::block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    if (t.index < 0) {
      top1_index[row] = -1;
      top1_prob[row] = NAN;
      margin[row] = NAN;
    } else {
      const float p1 = 1.0f / sum;
      top1_index[row] = t.index;
      top1_prob[row] = p1;
      margin[row] = p1 - expf(t.second - t.best) / sum;
    }
  }
}

template <typename T>
__global__ void router_kernel(const T* x, const T* __restrict__ weight, float bias, float* scores,
                              int dim, long long stride) {
  __shared__ float scratch[k_max_warps];
  const long long row = blockIdx.x;
  float dot = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += static_cast<int>(blockDim.x))
    dot += device::to_float(x[row * stride + i]) * device::to_float(weight[i]);
  dot = device::block_sum(dot, scratch);
  if (threadIdx.x == 0)
    scores[row] = 1.0f / (1.0f + expf(-(dot + bias)));
}

}  // namespace

LaunchConfig top2_confidence_launch(const LogitsShape& shape) {
  constexpr const char* name = "top2_confidence";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(shape.vocab > 0 && detail::fits_int(shape.vocab), name, "vocab must be positive");
  detail::require(shape.stride == 0 || shape.stride >= shape.vocab, name,
                  "stride shorter than a row");
  LaunchConfig config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows);
  config.threads = detail::threads_for(shape.vocab, k_top2_threads);
  return config;
}

void top2_confidence(const float* logits, const LogitsShape& shape, std::int32_t* top1_index,
                     float* top1_prob, float* margin, cudaStream_t stream) {
  const LaunchConfig config = top2_confidence_launch(shape);
  if (config.empty())
    return;
  top2_kernel<<<config.grid_x, config.threads, 0, stream>>>(
      logits, static_cast<int>(shape.vocab), shape.stride == 0 ? shape.vocab : shape.stride,
      top1_index, top1_prob, margin);
  check_cuda(cudaGetLastError(), "top2_confidence launch");
}

LaunchConfig router_scores_launch(const RouterShape& shape) {
  constexpr const char* name = "router_scores";
  detail::require(detail::fits_int(shape.rows), name, "rows out of range");
  detail::require(detail::fits_int(shape.dim), name, "dim out of range");
  detail::require(shape.stride == 0 || shape.stride >= shape.dim, name,
                  "stride shorter than a row");
  LaunchConfig config;
  config.grid_x = static_cast<std::uint32_t>(shape.rows);
  config.threads = detail::threads_for(shape.dim, k_router_threads);
  return config;
}

template <StorageType T>
void router_scores(const T* x, const T* weight, float bias, float* scores, const RouterShape& shape,
                   cudaStream_t stream) {
  const LaunchConfig config = router_scores_launch(shape);
  if (config.empty())
    return;
  router_kernel<T><<<config.grid_x, config.threads, 0, stream>>>(
      x, weight, bias, scores, static_cast<int>(shape.dim),
      shape.stride == 0 ? shape.dim : shape.stride);
  check_cuda(cudaGetLastError(), "router_scores launch");
}

template void router_scores<float>(const float*, const float*, float, float*, const RouterShape&,
                                   cudaStream_t);
template void router_scores<__half>(const __half*, const __half*, float, float*, const RouterShape&,
                                    cudaStream_t);
template void router_scores<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, float,
                                           float*, const RouterShape&, cudaStream_t);

}  // namespace exitsim::kernels
