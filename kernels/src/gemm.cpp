#include "exitsim/kernels/gemm.hpp"

#include <utility>

#include "exitsim/kernels/cuda_check.hpp"
#include "shape_check.hpp"

namespace exitsim::kernels {
namespace {

cudaDataType_t cuda_type(Dtype d) {
  switch (d) {
    case Dtype::fp32:
      return CUDA_R_32F;
    case Dtype::fp16:
      return CUDA_R_16F;
    case Dtype::bf16:
      return CUDA_R_16BF;
  }
  throw std::invalid_argument("gemm: unknown dtype");
}

}  // namespace

CublasHandle::CublasHandle() {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr)
    cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr)
      cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

GemmParams gemm_params(const GemmShape& shape, Dtype in, Dtype out) {
  constexpr const char* name = "gemm";
  detail::require(
      detail::fits_int(shape.m) && detail::fits_int(shape.n) && detail::fits_int(shape.k), name,
      "shape out of range");
  const std::int64_t ldx = shape.ldx == 0 ? shape.k : shape.ldx;
  const std::int64_t ldw = shape.ldw == 0 ? shape.k : shape.ldw;
  const std::int64_t ldy = shape.ldy == 0 ? shape.n : shape.ldy;
  detail::require(ldx >= shape.k && detail::fits_int(ldx), name, "ldx shorter than a row of x");
  detail::require(ldw >= shape.k && detail::fits_int(ldw), name, "ldw shorter than a row of W");
  detail::require(ldy >= shape.n && detail::fits_int(ldy), name, "ldy shorter than a row of y");
  detail::require(out == in || out == Dtype::fp32, name, "output must be the input type or fp32");
  GemmParams p;
  p.m = static_cast<int>(shape.n);
  p.n = static_cast<int>(shape.m);
  p.k = static_cast<int>(shape.k);
  // cuBLAS rejects leading dimensions of 0 even for empty matrices.
  p.lda = static_cast<int>(ldw > 0 ? ldw : 1);
  p.ldb = static_cast<int>(ldx > 0 ? ldx : 1);
  p.ldc = static_cast<int>(ldy > 0 ? ldy : 1);
  p.a_type = cuda_type(in);
  p.b_type = cuda_type(in);
  p.c_type = cuda_type(out);
  return p;
}

void gemm(const CublasHandle& handle, const void* x, const void* w, void* y, const GemmShape& shape,
          Dtype in, Dtype out, bool accumulate, cudaStream_t stream) {
  const GemmParams p = gemm_params(shape, in, out);
  if (shape.m == 0 || shape.n == 0)
    return;
  check_cublas(cublasSetStream(handle.get(), stream), "cublasSetStream");
  // k == 0 is left to cuBLAS: it scales y by beta, which is what an empty sum means.
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  check_cublas(
      cublasGemmEx(handle.get(), p.transa, p.transb, p.m, p.n, p.k, &alpha, w, p.a_type, p.lda, x,
                   p.b_type, p.ldb, &beta, y, p.c_type, p.ldc, p.compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace exitsim::kernels
