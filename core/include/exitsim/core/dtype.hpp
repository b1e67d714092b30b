#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace exitsim {

enum class DType : std::uint8_t { fp32, bf16, fp16, fp8, int8 };
inline constexpr std::size_t k_dtype_count = 5;
inline constexpr std::array<DType, k_dtype_count> k_all_dtypes = {
    DType::fp32, DType::bf16, DType::fp16, DType::fp8, DType::int8};

constexpr std::int64_t bytes_per_element(DType t) {
  switch (t) {
    case DType::fp32:
      return 4;
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp8:
    case DType::int8:
      return 1;
  }
  return 0;
}

std::string_view to_string(DType t);
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace exitsim
