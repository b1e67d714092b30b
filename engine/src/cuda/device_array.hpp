#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

#include "exitsim/kernels/cuda_check.hpp"

namespace exitsim::engine::cuda {

// Device memory owned by the GPU backend: weights uploaded once, and scratch that grows to the
// largest call seen and is then reused (no allocation on the decode path).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::span<const T> host) { upload(host); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  // At least `count` elements; the contents are lost when it grows.
  T* reserve(std::size_t count) {
    if (count > capacity_) {
      cudaFree(data_);
      data_ = nullptr;
      capacity_ = 0;
      void* p = nullptr;
      kernels::check_cuda(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
      data_ = static_cast<T*>(p);
      capacity_ = count;
    }
    return data_;
  }
  // Synchronous: for weights, once.
  void upload(std::span<const T> host) {
    reserve(host.size());
    kernels::check_cuda(
        cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy (weights)");
  }
  // Enqueued on `stream`; `host` must stay valid until the stream reaches it.
  void upload_async(std::span<const T> host, cudaStream_t stream) {
    reserve(host.size());
    kernels::check_cuda(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T),
                                        cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync (to device)");
  }

  T* get() const { return data_; }
  std::size_t capacity() const { return capacity_; }

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace exitsim::engine::cuda
