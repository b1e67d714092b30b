#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"
#include "exitsim/kernels/gemm.hpp"
#include "exitsim/kernels/kv_write.hpp"

namespace exitsim::kernels {

// K/V for tokens that skip a layer's computation but must leave K/V there (state_copy; the CPU
// engine's CpuModel::kv_only): one GEMM against the K and V rows of the fused q|k|v weight, rotary
// on K, and a write into the pool.
struct KvProjectShape {
  std::int64_t rows = 0;
  std::int64_t d_model = 0;
  std::int64_t q_dim = 0;  // n_heads * head_dim: the q rows of the fused weight, skipped
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  KvPoolShape pool;  // pool.kv_width must be n_kv_heads * head_dim
};

// Validates `shape` for all three steps (std::invalid_argument) and returns the elements of
// scratch kv_project needs: rows * 2 * kv_width. Pure host code.
std::int64_t kv_project_scratch(const KvProjectShape& shape);

// `h`: the attention-normed hidden rows [rows, d_model] (the caller runs rms_norm first, as
// kv_only does); `w_qkv`: [q_dim + 2 * kv_width, d_model], rows q then k then v as the engine's
// wq, wk, wv stacked. `positions` and `slots` are as for kv_write; `inv_freq` is rotary's
// frequency table (head_dim / 2 floats on the device); `scratch` holds kv_project_scratch(shape)
// elements. All on `stream`.
template <StorageType T>
void kv_project(const CublasHandle& handle, const T* h, const T* w_qkv,
                const std::int32_t* positions, const float* inv_freq, const std::int32_t* slots,
                T* scratch, T* pool, std::int32_t* pool_positions, const KvProjectShape& shape,
                cudaStream_t stream = nullptr);

// kv_project's two halves, for a caller that adds to K|V between them (per-recursion LoRA on the
// k and v projections): the K|V product into scratch ([rows, 2 kv_width], K then V per row), then
// rotary on K and the pool write. Both validate `shape` as kv_project does.
template <StorageType T>
void kv_project_gemm(const CublasHandle& handle, const T* h, const T* w_qkv, T* scratch,
                     const KvProjectShape& shape, cudaStream_t stream = nullptr);
template <StorageType T>
void kv_project_store(const std::int32_t* positions, const float* inv_freq,
                      const std::int32_t* slots, T* scratch, T* pool, std::int32_t* pool_positions,
                      const KvProjectShape& shape, cudaStream_t stream = nullptr);

}  // namespace exitsim::kernels
