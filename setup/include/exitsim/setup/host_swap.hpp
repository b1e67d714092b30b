#pragma once

// Swap preemption's host tier, sized once for both executors: the simulator's replica and the
// engine (whose host tier `validate` and the conformance suite compare with the simulator's).

#include <cstdint>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::setup {

// How many pool blocks (block_size rows of one K/V instance) the host swap space of one replica
// holds, and how long they take over the host link. Each GPU of the replica moves its share of a
// block over its own link, in parallel, so a block costs one GPU's bytes.
struct HostSwapLink {
  std::int64_t bytes_per_block = 0;  // one pool block's share on one GPU
  std::int64_t host_blocks = 0;
  double ns_per_block = 0;
  // The wait for `blocks` pool blocks moved before a step, rounded once.
  TimeNs transfer(std::int64_t blocks) const;
};

// A block's bytes are K and V of block_size tokens at one layer, in the model's dtype
// (model.dtype), on one GPU of `parallel`'s tensor split. Throws InputError (field
// "hardware.host_link_bandwidth_gbps") without a positive host link bandwidth.
HostSwapLink host_swap_link(const ModelShape& model, const HardwareSpec& hardware,
                            const ParallelSpec& parallel, std::int64_t block_size);

}  // namespace exitsim::setup
