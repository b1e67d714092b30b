#pragma once

#include <cstddef>
#include <cstdint>

namespace exitsim::kernels {

// A kernel's launch geometry, computed on the host by a pure function per kernel so that it can
// be unit-tested without a GPU. grid_x == 0 means there is nothing to launch.
struct LaunchConfig {
  std::uint32_t grid_x = 0;
  std::uint32_t threads = 0;  // per block, a whole number of warps
  std::size_t shared_bytes = 0;

  bool empty() const { return grid_x == 0; }
  friend bool operator==(const LaunchConfig&, const LaunchConfig&) = default;
};

inline constexpr std::int64_t k_warp_size = 32;

}  // namespace exitsim::kernels
