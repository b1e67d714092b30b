#pragma once
// Device helpers shared by the kernels: storage conversions and warp reductions.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace exitsim::kernels::device {

constexpr int k_warp = 32;
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Butterfly reductions: every lane ends with the result, so no broadcast is needed.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = k_warp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = k_warp / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

// Sum over the block; `scratch` holds one float per warp. Every thread gets the result. The
// leading barrier lets callers reuse `scratch` in consecutive reductions.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % k_warp;
  const int warp = static_cast<int>(threadIdx.x) / k_warp;
  const int warps = static_cast<int>(blockDim.x) / k_warp;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(total);
}

}  // namespace exitsim::kernels::device
