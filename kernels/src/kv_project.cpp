#include "exitsim/kernels/kv_project.hpp"

#include "exitsim/kernels/rotary.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {

namespace {

// The three steps' shapes; constructing them validates nothing, kv_project_scratch does.
struct Steps {
  GemmShape gemm;
  RotaryShape rotary;
  KvWriteShape write;
};

Steps steps_of(const KvProjectShape& shape) {
  const std::int64_t width = shape.pool.kv_width;
  return {
      .gemm = {.m = shape.rows, .n = 2 * width, .k = shape.d_model},
      .rotary = {.rows = shape.rows,
                 .heads = shape.n_kv_heads,
                 .head_dim = shape.head_dim,
                 .row_stride = 2 * width},
      .write = {
          .rows = shape.rows, .k_stride = 2 * width, .v_stride = 2 * width, .pool = shape.pool}};
}

}  // namespace

std::int64_t kv_project_scratch(const KvProjectShape& shape) {
  constexpr const char* name = "kv_project";
  detail::require(shape.rows >= 0 && shape.d_model >= 0 && shape.q_dim >= 0, name,
                  "negative shape");
  detail::require(shape.n_kv_heads > 0 && shape.head_dim > 0, name,
                  "n_kv_heads and head_dim must be positive");
  detail::require(shape.pool.kv_width == shape.n_kv_heads * shape.head_dim, name,
                  "pool.kv_width must be n_kv_heads * head_dim");
  // Every step is checked before any is enqueued, so a bad shape leaves the pool untouched.
  const Steps steps = steps_of(shape);
  gemm_params(steps.gemm, Dtype::fp32, Dtype::fp32);
  rotary_launch(steps.rotary);
  kv_write_launch(steps.write);
  return shape.rows * 2 * shape.pool.kv_width;
}

template <StorageType T>
void kv_project_gemm(const CublasHandle& handle, const T* h, const T* w_qkv, T* scratch,
                     const KvProjectShape& shape, cudaStream_t stream) {
  kv_project_scratch(shape);
  if (shape.rows == 0)
    return;
  // The K and V rows of the fused weight are adjacent, so one GEMM yields K|V per row.
  linear(handle, h, w_qkv + shape.q_dim * shape.d_model, scratch, steps_of(shape).gemm, false,
         stream);
}

template <StorageType T>
void kv_project_store(const std::int32_t* positions, const float* inv_freq,
                      const std::int32_t* slots, T* scratch, T* pool, std::int32_t* pool_positions,
                      const KvProjectShape& shape, cudaStream_t stream) {
  kv_project_scratch(shape);
  if (shape.rows == 0)
    return;
  const Steps steps = steps_of(shape);
  rotary(scratch, positions, inv_freq, steps.rotary, stream);
  kv_write(scratch, scratch + shape.pool.kv_width, slots, positions, pool, pool_positions,
           steps.write, stream);
}

template <StorageType T>
void kv_project(const CublasHandle& handle, const T* h, const T* w_qkv,
                const std::int32_t* positions, const float* inv_freq, const std::int32_t* slots,
                T* scratch, T* pool, std::int32_t* pool_positions, const KvProjectShape& shape,
                cudaStream_t stream) {
  kv_project_gemm(handle, h, w_qkv, scratch, shape, stream);
  kv_project_store(positions, inv_freq, slots, scratch, pool, pool_positions, shape, stream);
}

#define EXITSIM_KV_PROJECT(T)                                                                   \
  template void kv_project<T>(const CublasHandle&, const T*, const T*, const std::int32_t*,     \
                              const float*, const std::int32_t*, T*, T*, std::int32_t*,         \
                              const KvProjectShape&, cudaStream_t);                             \
  template void kv_project_gemm<T>(const CublasHandle&, const T*, const T*, T*,                 \
                                   const KvProjectShape&, cudaStream_t);                        \
  template void kv_project_store<T>(const std::int32_t*, const float*, const std::int32_t*, T*, \
                                    T*, std::int32_t*, const KvProjectShape&, cudaStream_t);
EXITSIM_KV_PROJECT(float)
EXITSIM_KV_PROJECT(__half)
EXITSIM_KV_PROJECT(__nv_bfloat16)
#undef EXITSIM_KV_PROJECT

}  // namespace exitsim::kernels
