#pragma once

#include <cstdint>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// How much paged KV memory one replica has: device memory minus weights minus a reserve for
// activations and workspace, cut into blocks of `block_size` tokens. Under tensor parallelism
// the figures are one GPU's (its shard of the weights, its K/V heads of each token): every GPU
// of the replica holds its share of every block, so the replica holds as many tokens as one GPU.
// Under pipeline parallelism a stage's GPUs hold the K/V of its layers only, and the stage with
// the least room binds (the weights and K/V figures are that stage's).
struct KvCapacity {
  int binding_stage = 0;          // the pipeline stage whose memory limits the blocks
  std::int64_t weight_bytes = 0;  // per GPU
  std::int64_t reserve_bytes = 0;
  std::int64_t kv_bytes_per_token = 0;  // per GPU, all layers that store K/V for a full-depth token
  std::int64_t block_size = 0;          // tokens per block
  std::int64_t blocks = 0;
  std::int64_t tokens() const { return blocks * block_size; }
};

struct KvCapacityRequest {
  std::int64_t block_size = 16;
  std::int64_t explicit_blocks = 0;  // > 0 overrides the derivation
  double memory_reserve_fraction = 0.1;
  int kv_layers = 0;        // layers storing K/V per token; 0 = every layer of the full depth
  ParallelSpec parallel{};  // how the replica's weights and K/V are split over its GPUs
};

// Throws InputError (field "model") when the weights and the reserve do not fit in device memory
// or leave room for less than one block: such a replica could never serve a token.
KvCapacity derive_kv_capacity(const ModelShape& model, const HardwareSpec& hardware,
                              const KvCapacityRequest& request);

}  // namespace exitsim::sim
