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
  // The fixed time of one collective over the link (NCCL's: synchronisation and hops, whatever
  // the group's size), beside its bytes at link_efficiency's share of link_bandwidth.
  TimeNs link_latency = 0;
  // The share of link_bandwidth a collective's bus bandwidth reaches (NCCL's busbw); 0: the cost
  // model's bandwidth efficiency.
  double link_efficiency = 0;
  // One point-to-point send to another GPU of the node (a pipeline hand-off), and the share of
  // link_bandwidth it reaches (0: link_efficiency).
  TimeNs send_latency = 0;
  double send_efficiency = 0;
  int gpus_per_node = 1;
  // Per GPU, per direction: each GPU's own network adapter (InfiniBand NDR 400 Gb/s = 50 GB/s).
  double node_link_bandwidth = 0;   // bytes/s; 0 = a single node
  TimeNs node_link_latency = 0;     // one point-to-point send between nodes
  double node_link_efficiency = 0;  // the share of node_link_bandwidth a send reaches; 0: as above

  friend bool operator==(const Interconnect&, const Interconnect&) = default;
};

// Where real kernels part from a bare roofline, max(FLOPs / peak, bytes / bandwidth): each a
// figure fitted to public GPU measurements for the presets (docs/cost_model.md, "Kernel
// corrections"); zeros keep the bare roofline.
struct KernelCorrections {
  // GPU time every kernel takes beside its FLOPs or bytes (start-up, tail, the last partial
  // wave), so that no kernel takes less. Not launch_overhead, the host's cost of a launch, which
  // CUDA graphs remove.
  double min_kernel_ns = 0;
  // Near the ridge neither compute nor memory alone sets a kernel's time: they blend as
  // (compute^k + memory^k)^(1/k). 0: max(compute, memory).
  double ridge_exponent = 0;
  // The share of peak bandwidth element-wise kernels (norms, activations, softmax) reach; 0: the
  // cost model's bandwidth efficiency, as GEMMs.
  double elementwise_efficiency = 0;
  // A decode attention kernel's time beside its K/V bytes: a floor, in place of min_kernel_ns,
  // and a term per sequence and K/V head of the shard (each a tile the kernel schedules).
  double decode_attention_floor_ns = 0;
  double decode_attention_ns_per_sequence_head = 0;
  // The share of peak FLOP/s prefill attention reaches (FlashAttention-2-class on A100, -3-class
  // on H100); 0: the cost model's flops efficiency, as GEMMs.
  double prefill_attention_efficiency = 0;
  // Where the values come from, for a simulation's notes; empty: not fitted.
  std::string source;

  friend bool operator==(const KernelCorrections&, const KernelCorrections&) = default;
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
  KernelCorrections kernels;

  double peak_flops_for(DType t) const { return peak_flops[static_cast<std::size_t>(t)]; }
  void set_peak_flops(DType t, double flops) { peak_flops[static_cast<std::size_t>(t)] = flops; }

  friend bool operator==(const HardwareSpec&, const HardwareSpec&) = default;
};

}  // namespace exitsim
