#pragma once

// How the roofline turns an op's FLOPs and bytes into time on one accelerator: its efficiencies
// and the kernel corrections of the hardware (docs/cost_model.md, "Kernel corrections"). Private
// to sim/src/cost.

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {

// `value` when set (positive), else `otherwise`.
inline double or_default(double value, double otherwise) {
  return value > 0 ? value : otherwise;
}

// Throws InputError naming the hardware key of a correction out of its range.
void check_corrections(const HardwareSpec& hardware);

class OpRates {
 public:
  // `peak`: the hardware's FLOP/s for the model's dtype; `tensor_parallel`: whether the
  // collectives run (their link must then have a bandwidth).
  OpRates(const HardwareSpec& hardware, double peak, RooflineEfficiency efficiency,
          bool tensor_parallel);

  // Sets the time of a FLOP and a byte, the fixed and per-unit times and the parameters' names of
  // `params`, an op of kind `kind` on the shard `shard`.
  void apply(OpKind kind, const TensorShard& shard, OpParams& params) const;

 private:
  double gemm_ns_per_flop_ = 0;
  double attention_ns_per_flop_ = 0;  // prefill attention
  double ns_per_byte_ = 0;
  double elementwise_ns_per_byte_ = 0;
  double link_ns_per_byte_ = 0;
  double min_kernel_ns_ = 0;
  double decode_floor_ns_ = 0;
  double decode_ns_per_sequence_head_ = 0;
  double collective_latency_ns_ = 0;
};

}  // namespace exitsim::sim
