#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "exitsim/core/dtype.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim {

// How an accelerator reaches the others of its node: the link tensor parallelism's collectives
// run over (NVLink on SXM boards, PCIe otherwise); and those of other nodes: the network a
// pipeline stage hands its activations over when the next stage is on another node.
struct Interconnect {
  // Per direction, per GPU (NVLink 4's 900 GB/s "total" is 450 each way): a ring collective moves
  // its bytes one way around the ring.
  double link_bandwidth = 0;  // bytes/s
  TimeNs link_latency = 0;    // per step of a ring collective (synchronisation and hop)
  int gpus_per_node = 1;
  // Per GPU, per direction: each GPU's own network adapter (InfiniBand NDR 400 Gb/s = 50 GB/s).
  double node_link_bandwidth = 0;  // bytes/s; 0 = a single node
  TimeNs node_link_latency = 0;    // one point-to-point send between nodes

  friend bool operator==(const Interconnect&, const Interconnect&) = default;
};

// One accelerator, as a roofline cost model sees it.
struct HardwareSpec {
  std::string name;
  // Dense (no structured sparsity) peak FLOP/s per dtype, indexed by DType; 0 = unsupported.
  std::array<double, k_dtype_count> peak_flops{};
  double memory_bandwidth = 0;  // bytes/s
  std::int64_t memory_bytes = 0;
  TimeNs launch_overhead = 0;  // per kernel launch
  Interconnect interconnect;
  // The GPU's link to its host (PCIe), per direction, and the host memory set aside per GPU for
  // swapped-out K/V (scheduler.preemption: swap; vLLM's --swap-space, 4 GiB by default).
  double host_link_bandwidth = 0;  // bytes/s
  std::int64_t host_swap_bytes = 0;

  double peak_flops_for(DType t) const { return peak_flops[static_cast<std::size_t>(t)]; }
  void set_peak_flops(DType t, double flops) { peak_flops[static_cast<std::size_t>(t)] = flops; }

  friend bool operator==(const HardwareSpec&, const HardwareSpec&) = default;
};

}  // namespace exitsim
