#include "exitsim/profiler/kernel_kind.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

namespace exitsim::profiler {

traces::OpKind classify_kernel(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  using traces::OpKind;
  // Checked in order: "flash_fwd" kernels may contain "gemm" in template arguments, and norm
  // kernels are often named after the softmax they fuse, so the specific names come first.
  static constexpr std::array<std::pair<std::string_view, OpKind>, 16> k_patterns = {{
      {"rms_norm", OpKind::norm},
      {"rmsnorm", OpKind::norm},
      {"layer_norm", OpKind::norm},
      {"layernorm", OpKind::norm},
      {"flash", OpKind::attention},
      {"attention", OpKind::attention},
      {"attn", OpKind::attention},
      {"fmha", OpKind::attention},
      {"gemm", OpKind::gemm},
      {"gemv", OpKind::gemm},
      {"cutlass", OpKind::gemm},
      {"sm90_xmma", OpKind::gemm},
      {"topk", OpKind::sampling},
      {"sampl", OpKind::sampling},
      {"argmax", OpKind::sampling},
      {"elementwise", OpKind::elementwise},
  }};
  for (const auto& [pattern, kind] : k_patterns) {
    if (lower.find(pattern) != std::string::npos)
      return kind;
  }
  return OpKind::other;
}

}  // namespace exitsim::profiler
