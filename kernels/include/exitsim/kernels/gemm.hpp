#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "exitsim/kernels/dtype.hpp"

namespace exitsim::kernels {

// Owns one cuBLAS handle. Creating it needs a device (throws InputError, field "cuda", without
// one). Move-only; use one per host thread.
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// y [m, n] = x [m, k] . W^T with W [n, k]: row-major throughout, W as the engine stores a linear
// (engine::linear_rows' [out, in]). Leading dimensions 0 mean contiguous rows; larger ones let a
// call read a slice of a fused weight or write into part of a wider row.
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t ldx = 0;  // elements between rows of x; 0: k
  std::int64_t ldw = 0;  // elements between rows of W; 0: k
  std::int64_t ldy = 0;  // elements between rows of y; 0: n
};

// The column-major cublasGemmEx call that computes the row-major product: cuBLAS sees y^T [n, m]
// = W (read transposed) . x^T, so no data moves. Pure host code, so it is tested without a GPU.
struct GemmParams {
  cublasOperation_t transa = CUBLAS_OP_T;
  cublasOperation_t transb = CUBLAS_OP_N;
  int m = 0;  // cuBLAS's m: our n
  int n = 0;  // cuBLAS's n: our m
  int k = 0;
  int lda = 0;
  int ldb = 0;
  int ldc = 0;
  cudaDataType_t a_type = CUDA_R_32F;  // W
  cudaDataType_t b_type = CUDA_R_32F;  // x
  cudaDataType_t c_type = CUDA_R_32F;  // y
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// Throws std::invalid_argument for a bad shape or an unsupported pair of types: `out` must be
// `in` or fp32 (fp32 logits from an fp16/bf16 lm-head, say).
GemmParams gemm_params(const GemmShape& shape, Dtype in, Dtype out);

// y = x W^T (+ y when `accumulate`, for residual adds), fp32 compute (no TF32 unless the handle's
// math mode asks for it), enqueued on `stream`. Empty shapes do nothing. Throws InputError (field
// "cuda") when cuBLAS fails.
void gemm(const CublasHandle& handle, const void* x, const void* w, void* y, const GemmShape& shape,
          Dtype in, Dtype out, bool accumulate = false, cudaStream_t stream = nullptr);

// Typed convenience over gemm().
template <StorageType In, StorageType Out>
void linear(const CublasHandle& handle, const In* x, const In* w, Out* y, const GemmShape& shape,
            bool accumulate = false, cudaStream_t stream = nullptr) {
  gemm(handle, x, w, y, shape, dtype_of<In>, dtype_of<Out>, accumulate, stream);
}

}  // namespace exitsim::kernels
