#include "exitsim/kernels/gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/linear.hpp"
#include "kernels/support/device_buffer.hpp"
#include "kernels/support/reference.hpp"

namespace exitsim::kernels {
namespace {

using testing::DeviceBuffer;

TEST(CudaCheck, CublasStatusBecomesAnInputError) {
  try {
    check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().field, "cuda");
    EXPECT_EQ(std::string(e.what()),
              std::string("cuda: cublasGemmEx failed: CUBLAS_STATUS_INVALID_VALUE: ") +
                  cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE));
  }
  EXPECT_NO_THROW(check_cublas(CUBLAS_STATUS_SUCCESS, "anything"));
}

TEST(GemmParams, RowMajorProductAsTransposedColumnMajor) {
  // y [5, 3] = x [5, 4] W[3, 4]^T: cuBLAS computes y^T [3, 5] = op(W) x^T with W transposed.
  const GemmParams p = gemm_params({.m = 5, .n = 3, .k = 4}, Dtype::fp32, Dtype::fp32);
  EXPECT_EQ(p.transa, CUBLAS_OP_T);
  EXPECT_EQ(p.transb, CUBLAS_OP_N);
  EXPECT_EQ(p.m, 3);
  EXPECT_EQ(p.n, 5);
  EXPECT_EQ(p.k, 4);
  EXPECT_EQ(p.lda, 4);
  EXPECT_EQ(p.ldb, 4);
  EXPECT_EQ(p.ldc, 3);
  EXPECT_EQ(p.a_type, CUDA_R_32F);
  EXPECT_EQ(p.c_type, CUDA_R_32F);
  EXPECT_EQ(p.compute, CUBLAS_COMPUTE_32F);

  // A slice of a fused weight written into part of a wider output row.
  const GemmParams s = gemm_params({.m = 2, .n = 8, .k = 16, .ldx = 20, .ldw = 16, .ldy = 24},
                                   Dtype::bf16, Dtype::fp32);
  EXPECT_EQ(s.lda, 16);
  EXPECT_EQ(s.ldb, 20);
  EXPECT_EQ(s.ldc, 24);
  EXPECT_EQ(s.a_type, CUDA_R_16BF);
  EXPECT_EQ(s.b_type, CUDA_R_16BF);
  EXPECT_EQ(s.c_type, CUDA_R_32F);
  EXPECT_EQ(gemm_params({.m = 1, .n = 1, .k = 1}, Dtype::fp16, Dtype::fp16).c_type, CUDA_R_16F);
}

TEST(GemmParams, RejectsBadShapesAndTypes) {
  EXPECT_THROW(gemm_params({.m = -1, .n = 1, .k = 1}, Dtype::fp32, Dtype::fp32),
               std::invalid_argument);
  EXPECT_THROW(gemm_params({.m = 1, .n = 1, .k = 4, .ldx = 3}, Dtype::fp32, Dtype::fp32),
               std::invalid_argument);
  EXPECT_THROW(gemm_params({.m = 1, .n = 4, .k = 4, .ldy = 2}, Dtype::fp32, Dtype::fp32),
               std::invalid_argument);
  EXPECT_THROW(gemm_params({.m = 1, .n = 1, .k = 1}, Dtype::fp32, Dtype::fp16),
               std::invalid_argument);
  EXPECT_THROW(gemm_params({.m = 1, .n = 1, .k = 1}, Dtype::fp16, Dtype::bf16),
               std::invalid_argument);
}

template <typename T>
class GemmKernel : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(GemmKernel, StorageTypes);

template <typename Out>
void check_against_reference(const std::vector<float>& actual, const std::vector<double>& expected,
                             const std::vector<double>& abs_sum) {
  // fp32 accumulation over k terms: 1e-5 of sum |x_i w_i| (a loose multiple of the k * 2^-24
  // worst case for the shapes here), plus one rounding of the output to Out.
  const double rounding = std::same_as<Out, float> ? 0.0 : testing::storage_tolerance<Out>();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double bound = 1e-5 * abs_sum[i] + rounding * std::abs(expected[i]);
    ASSERT_LE(std::abs(actual[i] - expected[i]), bound) << "element " << i;
  }
}

TYPED_TEST(GemmKernel, MatchesADoubleReference) {
  using T = TypeParam;
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  const CublasHandle handle;
  std::mt19937 rng(99);
  struct Shape {
    std::int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 96, 64}, Shape{7, 33, 100}, Shape{64, 256, 512}}) {
    SCOPED_TRACE("m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
                 std::to_string(s.k));
    const auto x = testing::random_values<T>(static_cast<std::size_t>(s.m * s.k), rng);
    const auto w = testing::random_values<T>(static_cast<std::size_t>(s.n * s.k), rng);
    const std::vector<double> expected = testing::gemm_reference(x, w, s.m, s.n, s.k);
    std::vector<float> abs_x(x.size()), abs_w(w.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      abs_x[i] = std::abs(x[i]);
    for (std::size_t i = 0; i < w.size(); ++i)
      abs_w[i] = std::abs(w[i]);
    const std::vector<double> abs_sum = testing::gemm_reference(abs_x, abs_w, s.m, s.n, s.k);
    DeviceBuffer<T> dx(testing::to_storage<T>(x));
    DeviceBuffer<T> dw(testing::to_storage<T>(w));
    const GemmShape shape{.m = s.m, .n = s.n, .k = s.k};

    DeviceBuffer<T> dy(static_cast<std::size_t>(s.m * s.n));  // output in the input type
    linear(handle, dx.get(), dw.get(), dy.get(), shape);
    DeviceBuffer<float> dy32(static_cast<std::size_t>(s.m * s.n));  // fp32 output (logits)
    linear(handle, dx.get(), dw.get(), dy32.get(), shape);
    testing::synchronize();
    check_against_reference<T>(testing::to_floats(dy.download()), expected, abs_sum);
    check_against_reference<float>(dy32.download(), expected, abs_sum);

    // accumulate adds onto y (a residual add), here y + y.
    linear(handle, dx.get(), dw.get(), dy32.get(), shape, true);
    testing::synchronize();
    std::vector<double> twice(expected), twice_abs(abs_sum);
    for (std::size_t i = 0; i < twice.size(); ++i) {
      twice[i] *= 2;
      twice_abs[i] *= 2;
    }
    check_against_reference<float>(dy32.download(), twice, twice_abs);
  }
}

TEST(GemmEngineLinear, Fp32MatchesTheEngine) {
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  // The engine's own y = x W^T (engine::linear_rows) on the same layout, fp32 both sides:
  // 1e-5 of sum |x_i w_i| <= 48, as above.
  const engine::Matrix x = engine::Matrix::Random(5, 48);
  const engine::Matrix w = engine::Matrix::Random(20, 48);
  engine::Matrix expected;
  engine::linear_rows(w, x, {}, expected);
  const CublasHandle handle;
  DeviceBuffer<float> dx(std::vector<float>(x.data(), x.data() + x.size()));
  DeviceBuffer<float> dw(std::vector<float>(w.data(), w.data() + w.size()));
  DeviceBuffer<float> dy(static_cast<std::size_t>(expected.size()));
  linear(handle, dx.get(), dw.get(), dy.get(), {.m = 5, .n = 20, .k = 48});
  testing::synchronize();
  const std::vector<float> actual = dy.download();
  for (Eigen::Index i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[static_cast<std::size_t>(i)], expected.data()[i], 1e-5 * 48);
}

}  // namespace
}  // namespace exitsim::kernels
