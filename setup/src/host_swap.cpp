#include "exitsim/setup/host_swap.hpp"

#include <algorithm>
#include <cmath>

#include "exitsim/core/error.hpp"

namespace exitsim::setup {

TimeNs HostSwapLink::transfer(std::int64_t blocks) const {
  return static_cast<TimeNs>(std::llround(static_cast<double>(blocks) * ns_per_block));
}

HostSwapLink host_swap_link(const ModelShape& model, const HardwareSpec& hardware,
                            const ParallelSpec& parallel, std::int64_t block_size) {
  if (!(hardware.host_link_bandwidth > 0)) {
    throw InputError(
        {"", 0, 0, "hardware.host_link_bandwidth_gbps"},
        expected_found("a positive host link bandwidth for scheduler.preemption: swap", "0"));
  }
  HostSwapLink link;
  link.bytes_per_block =
      TensorShard::of(model, parallel).kv_bytes_per_token_per_layer(model) * block_size;
  link.host_blocks = hardware.host_swap_bytes / std::max<std::int64_t>(link.bytes_per_block, 1);
  link.ns_per_block =
      static_cast<double>(link.bytes_per_block) * 1e9 / hardware.host_link_bandwidth;
  return link;
}

}  // namespace exitsim::setup
