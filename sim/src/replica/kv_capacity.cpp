#include "exitsim/sim/kv_capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exitsim/core/checked.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/parallel.hpp"

namespace exitsim::sim {
namespace {

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(1 << 30);
}

// A size past int64 as the largest int64: larger than any device memory, so it leaves room
// for no block and the run is refused as not fitting (K/V of the widest heads at 4096-token
// blocks over 10^8 layers is 2^66 bytes).
std::int64_t saturated(Checked bytes) {
  return bytes.value().value_or(std::numeric_limits<std::int64_t>::max());
}

std::int64_t kv_block_bytes(const KvCapacity& capacity) {
  return saturated(Checked(capacity.kv_bytes_per_token) * capacity.block_size);
}

}  // namespace

namespace {

// The blocks one stage's GPUs have room for, and its figures.
KvCapacity stage_capacity(const ModelShape& model, const HardwareSpec& hardware,
                          const KvCapacityRequest& request, const PipelineStage& stage) {
  KvCapacity capacity;
  capacity.block_size = request.block_size;
  const TensorShard shard = TensorShard::of(model, request.parallel);
  capacity.weight_bytes = shard.weight_bytes(model, stage);
  const int full = model.depth.full_depth();
  const int kv_layers = request.kv_layers > 0 ? request.kv_layers : full;
  // The stage's share of the layers that store K/V, rounded up (they are the model's when one
  // stage holds it all).
  const std::int64_t stage_kv_layers = (std::int64_t{kv_layers} * stage.layers() + full - 1) / full;
  capacity.kv_bytes_per_token =
      saturated(Checked(shard.kv_bytes_per_token_per_layer(model)) * stage_kv_layers);
  capacity.reserve_bytes = static_cast<std::int64_t>(
      std::llround(static_cast<double>(hardware.memory_bytes) * request.memory_reserve_fraction));
  const std::int64_t free_bytes =
      hardware.memory_bytes - capacity.weight_bytes - capacity.reserve_bytes;
  const std::int64_t block_bytes = kv_block_bytes(capacity);
  capacity.blocks = free_bytes > 0 && block_bytes > 0 ? free_bytes / block_bytes : 0;
  return capacity;
}

std::string per_gpu(const ParallelSpec& parallel, int stage) {
  if (parallel.pipeline > 1) {
    return fmt::format(" per GPU of pipeline stage {} at parallel.tensor {}, parallel.pipeline {}",
                       stage, parallel.tensor, parallel.pipeline);
  }
  if (parallel.tensor > 1)
    return fmt::format(" per GPU at parallel.tensor {}", parallel.tensor);
  return {};
}

}  // namespace

KvCapacity derive_kv_capacity(const ModelShape& model, const HardwareSpec& hardware,
                              const KvCapacityRequest& request) {
  const ParallelSpec& parallel = request.parallel;
  const std::vector<PipelineStage> stages =
      split_pipeline(model.depth.full_depth(), std::max(parallel.pipeline, 1));
  KvCapacity capacity = stage_capacity(model, hardware, request, stages.front());
  for (std::size_t s = 1; s < stages.size(); ++s) {
    KvCapacity stage = stage_capacity(model, hardware, request, stages[s]);
    if (stage.blocks < capacity.blocks) {
      stage.binding_stage = static_cast<int>(s);
      capacity = stage;
    }
  }
  const std::int64_t free_bytes =
      hardware.memory_bytes - capacity.weight_bytes - capacity.reserve_bytes;
  const std::int64_t block_bytes = kv_block_bytes(capacity);
  if (request.explicit_blocks > 0) {
    // An explicit count may model less memory than the device has, never more.
    const std::int64_t fits = capacity.blocks;
    if (request.explicit_blocks > fits) {
      throw InputError(
          {"", 0, 0, "scheduler.kv_blocks"},
          fmt::format("expected at most {} blocks ({} has {:.2f} GiB; {:.2f} GiB of {} weights{} "
                      "and a {:.2f} GiB reserve leave {:.2f} GiB for K/V at {} KiB per block), "
                      "found {} ({:.2f} GiB)",
                      fits, hardware.name, gib(hardware.memory_bytes), gib(capacity.weight_bytes),
                      model.name, per_gpu(parallel, capacity.binding_stage),
                      gib(capacity.reserve_bytes), gib(std::max<std::int64_t>(0, free_bytes)),
                      block_bytes / 1024, request.explicit_blocks,
                      static_cast<double>(request.explicit_blocks) *
                          static_cast<double>(block_bytes) / static_cast<double>(1 << 30)));
    }
    capacity.blocks = request.explicit_blocks;
    return capacity;
  }
  if (capacity.blocks < 1) {
    throw InputError(
        {"", 0, 0, "model"},
        fmt::format("{} needs {:.2f} GiB of weights{} plus a {:.2f} GiB reserve, but {} has "
                    "{:.2f} GiB: no room for KV cache (use more GPUs per replica with "
                    "parallel.tensor or parallel.pipeline, a larger accelerator, a smaller "
                    "dtype, or lower scheduler.memory_reserve_fraction)",
                    model.name, gib(capacity.weight_bytes),
                    per_gpu(parallel, capacity.binding_stage), gib(capacity.reserve_bytes),
                    hardware.name, gib(hardware.memory_bytes)));
  }
  return capacity;
}

}  // namespace exitsim::sim
