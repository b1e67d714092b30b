#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <concepts>
#include <cstddef>
#include <string_view>

namespace exitsim::kernels {

// Storage type of activations, weights and the K/V pool. Arithmetic is fp32 whatever the storage.
enum class Dtype { fp32, fp16, bf16 };

// The kernels are instantiated for exactly these element types.
template <typename T>
concept StorageType =
    std::same_as<T, float> || std::same_as<T, __half> || std::same_as<T, __nv_bfloat16>;

template <StorageType T>
inline constexpr Dtype dtype_of = std::same_as<T, float>    ? Dtype::fp32
                                  : std::same_as<T, __half> ? Dtype::fp16
                                                            : Dtype::bf16;

constexpr std::size_t dtype_size(Dtype d) noexcept {
  return d == Dtype::fp32 ? 4 : 2;
}

constexpr std::string_view dtype_name(Dtype d) noexcept {
  switch (d) {
    case Dtype::fp32:
      return "fp32";
    case Dtype::fp16:
      return "fp16";
    case Dtype::bf16:
      return "bf16";
  }
  return "?";
}

}  // namespace exitsim::kernels
