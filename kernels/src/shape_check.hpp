#pragma once
// Host-side argument checks shared by the launch functions.

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace exitsim::kernels::detail {

inline void require(bool ok, const char* kernel, const char* what) {
  if (!ok)
    throw std::invalid_argument(std::string(kernel) + ": " + what);
}

// Kernels index with int inside a row or a grid; larger shapes are rejected, not truncated.
inline bool fits_int(std::int64_t v) {
  return v >= 0 && v <= INT_MAX;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Enough whole warps to cover `width` once, at most `max_threads`.
inline std::uint32_t threads_for(std::int64_t width, std::int64_t max_threads) {
  const std::int64_t wanted = ceil_div(width < 1 ? 1 : width, 32) * 32;
  return static_cast<std::uint32_t>(wanted < max_threads ? wanted : max_threads);
}

}  // namespace exitsim::kernels::detail
