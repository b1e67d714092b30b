#include "exitsim/kernels/rms_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/kernels/cuda_check.hpp"
#include "support/device_buffer.hpp"

namespace exitsim::kernels {
namespace {

// Device memory that frees itself, so a failed assertion does not leak it.
class DeviceFloats {
 public:
  explicit DeviceFloats(std::size_t count) : count_(count) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, count * sizeof(float)), "cudaMalloc");
    data_ = static_cast<float*>(p);
  }
  ~DeviceFloats() { cudaFree(data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return data_; }
  void upload(const float* host) {
    check_cuda(cudaMemcpy(data_, host, count_ * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy");
  }
  void download(float* host) const {
    check_cuda(cudaMemcpy(host, data_, count_ * sizeof(float), cudaMemcpyDeviceToHost),
               "cudaMemcpy");
  }

 private:
  std::size_t count_;
  float* data_ = nullptr;
};

TEST(CudaCheck, ThrowsInputErrorWithTheCudaErrorString) {
  try {
    check_cuda(cudaErrorInvalidValue, "cudaMemcpy");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().field, "cuda");
    EXPECT_EQ(std::string(e.what()),
              std::string("cuda: cudaMemcpy failed: cudaErrorInvalidValue: ") +
                  cudaGetErrorString(cudaErrorInvalidValue));
  }
  EXPECT_NO_THROW(check_cuda(cudaSuccess, "anything"));
}

TEST(RmsNormKernel, MatchesTheCpuReference) {
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  struct Shape {
    std::int64_t rows;
    std::int64_t dim;
  };
  // d below, at and above one warp, not multiples of 32, and above the block size.
  for (const Shape shape : {Shape{1, 1}, Shape{3, 7}, Shape{5, 32}, Shape{4, 33}, Shape{17, 100},
                            Shape{8, 255}, Shape{2, 257}, Shape{33, 1000}, Shape{3, 4096}}) {
    SCOPED_TRACE("rows " + std::to_string(shape.rows) + " dim " + std::to_string(shape.dim));
    engine::Matrix x(shape.rows, shape.dim);
    Eigen::VectorXf weight(shape.dim);
    for (Eigen::Index i = 0; i < x.size(); ++i)
      x.data()[i] = normal(rng);
    for (Eigen::Index i = 0; i < weight.size(); ++i)
      weight[i] = normal(rng);
    const float eps = 1e-6f;
    const engine::Matrix expected = engine::rms_norm(x, weight, eps);

    const auto n = static_cast<std::size_t>(x.size());
    DeviceFloats dx(n);
    DeviceFloats dw(static_cast<std::size_t>(shape.dim));
    DeviceFloats dy(n);
    dx.upload(x.data());
    dw.upload(weight.data());
    rms_norm(dx.get(), dw.get(), dy.get(), shape.rows, shape.dim, eps);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    engine::Matrix actual(shape.rows, shape.dim);
    dy.download(actual.data());

    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const float e = expected.data()[i];
      const float a = actual.data()[i];
      ASSERT_LE(std::abs(a - e), 1e-5f * std::max(std::abs(e), 1e-3f)) << "element " << i;
    }

    // In place (y aliasing x) gives the same result.
    rms_norm(dx.get(), dw.get(), dx.get(), shape.rows, shape.dim, eps);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    engine::Matrix in_place(shape.rows, shape.dim);
    dx.download(in_place.data());
    EXPECT_EQ(in_place, actual);
  }
}

// The GPU backend's half-precision path: the fp32 residual normalized into fp16/bf16 rows for the
// matrix products, and half rows normalized in place.
template <typename Types>
class RmsNormStorage : public ::testing::Test {};
using NormPairs = ::testing::Types<
    testing::StoragePair<float, __half>, testing::StoragePair<float, __nv_bfloat16>,
    testing::StoragePair<__half, __half>, testing::StoragePair<__nv_bfloat16, __nv_bfloat16>>;
TYPED_TEST_SUITE(RmsNormStorage, NormPairs);

TYPED_TEST(RmsNormStorage, MatchesTheCpuReferenceWithinTheOutputsRounding) {
  using In = typename TypeParam::input;
  using Out = typename TypeParam::output;
  if (!cuda_device_available())
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  std::mt19937 rng(777);
  for (const std::int64_t dim : {7, 960, 4096}) {
    const std::int64_t rows = 5;
    const std::vector<float> x =
        testing::random_values<In>(static_cast<std::size_t>(rows * dim), rng, 2.0f);
    const std::vector<float> weight =
        testing::random_values<float>(static_cast<std::size_t>(dim), rng);
    const Eigen::Map<const engine::Matrix> x_host(x.data(), rows, dim);
    const Eigen::Map<const Eigen::VectorXf> w_host(weight.data(), dim);
    const engine::Matrix expected = engine::rms_norm(x_host, w_host, 1e-6f);
    testing::DeviceBuffer<In> dx(testing::to_storage<In>(x));
    testing::DeviceBuffer<float> dw(weight);
    testing::DeviceBuffer<Out> dy(x.size());
    rms_norm(dx.get(), dw.get(), dy.get(), rows, dim, 1e-6f);
    testing::synchronize();
    const std::vector<float> got = testing::to_floats(dy.download());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const float e = expected.data()[i];
      ASSERT_LE(std::abs(got[i] - e),
                testing::storage_tolerance<Out>() * std::max(std::abs(e), 1e-2f))
          << "dim " << dim << " element " << i;
    }
  }
}

TEST(RmsNormKernel, EmptyShapesLaunchNothing) {
  const auto norm = [](std::int64_t rows, std::int64_t dim) {
    rms_norm<float, float>(nullptr, nullptr, nullptr, rows, dim, 1e-6f);
  };
  EXPECT_NO_THROW(norm(0, 16));
  EXPECT_NO_THROW(norm(4, 0));
  EXPECT_THROW(norm(-1, 4), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::kernels
