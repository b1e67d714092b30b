#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "exitsim/core/dtype.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim {

// One accelerator, as a roofline cost model sees it.
struct HardwareSpec {
  std::string name;
  // Dense (no structured sparsity) peak FLOP/s per dtype, indexed by DType; 0 = unsupported.
  std::array<double, k_dtype_count> peak_flops{};
  double memory_bandwidth = 0;  // bytes/s
  std::int64_t memory_bytes = 0;
  TimeNs launch_overhead = 0;  // per kernel launch

  double peak_flops_for(DType t) const { return peak_flops[static_cast<std::size_t>(t)]; }
  void set_peak_flops(DType t, double flops) { peak_flops[static_cast<std::size_t>(t)] = flops; }

  friend bool operator==(const HardwareSpec&, const HardwareSpec&) = default;
};

}  // namespace exitsim
