#include "exitsim/core/dtype.hpp"

namespace exitsim {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
    case DType::fp8:
      return "fp8";
    case DType::int8:
      return "int8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : k_all_dtypes) {
    if (to_string(t) == name)
      return t;
  }
  return std::nullopt;
}

}  // namespace exitsim
