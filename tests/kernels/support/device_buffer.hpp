#pragma once
// Test helpers: device memory that frees itself, and host conversions to the storage types.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <random>
#include <vector>

#include "exitsim/kernels/cuda_check.hpp"
#include "exitsim/kernels/dtype.hpp"

namespace exitsim::kernels::testing {

// Device memory that frees itself, so a failed assertion does not leak it.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    void* p = nullptr;
    // cudaMalloc(0) may hand back nullptr; one element keeps every buffer a real pointer.
    check_cuda(cudaMalloc(&p, (count == 0 ? 1 : count) * sizeof(T)), "cudaMalloc");
    data_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::size_t size() const { return count_; }
  void upload(const std::vector<T>& host) {
    check_cuda(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
               "cudaMemcpy");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check_cuda(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    return host;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

// The element types of a kernel that reads one storage type and writes another, for typed tests.
template <StorageType In, StorageType Out>
struct StoragePair {
  using input = In;
  using output = Out;
};

inline void synchronize() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

template <StorageType T>
T to_storage(float x) {
  if constexpr (std::same_as<T, float>) {
    return x;
  } else if constexpr (std::same_as<T, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

template <StorageType T>
float to_float(T x) {
  if constexpr (std::same_as<T, float>) {
    return x;
  } else if constexpr (std::same_as<T, __half>) {
    return __half2float(x);
  } else {
    return __bfloat162float(x);
  }
}

template <StorageType T>
std::vector<T> to_storage(const std::vector<float>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = to_storage<T>(x[i]);
  return out;
}

template <StorageType T>
std::vector<float> to_floats(const std::vector<T>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = to_float(x[i]);
  return out;
}

// Normal values already rounded to what T holds, so a reference sees exactly the kernel's inputs.
template <StorageType T>
std::vector<float> random_values(std::size_t count, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(count);
  for (float& v : x)
    v = to_float(to_storage<T>(normal(rng)));
  return x;
}

// Per storage type: the relative error of rounding one result to T, plus headroom for the fp32
// arithmetic before it. fp32 results differ from the CPU only by float rounding (~1e-7 per op);
// fp16 keeps 11 significant bits (2^-11 ~ 4.9e-4), bf16 8 (2^-8 ~ 3.9e-3).
template <StorageType T>
constexpr float storage_tolerance() {
  if constexpr (std::same_as<T, float>) {
    return 1e-5f;
  } else if constexpr (std::same_as<T, __half>) {
    return 1e-3f;
  } else {
    return 8e-3f;
  }
}

}  // namespace exitsim::kernels::testing
