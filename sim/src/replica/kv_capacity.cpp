#include "exitsim/sim/kv_capacity.hpp"

#include <fmt/format.h>

#include <cmath>

#include "exitsim/core/error.hpp"
#include "exitsim/core/parallel.hpp"

namespace exitsim::sim {
namespace {

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(1 << 30);
}

}  // namespace

KvCapacity derive_kv_capacity(const ModelShape& model, const HardwareSpec& hardware,
                              const KvCapacityRequest& request) {
  KvCapacity capacity;
  capacity.block_size = request.block_size;
  const TensorShard shard = TensorShard::of(model, request.tensor);
  capacity.weight_bytes = shard.weight_bytes(model);
  const int kv_layers = request.kv_layers > 0 ? request.kv_layers : model.depth.full_depth();
  capacity.kv_bytes_per_token = shard.kv_bytes_per_token_per_layer(model) * kv_layers;
  capacity.reserve_bytes = static_cast<std::int64_t>(
      std::llround(static_cast<double>(hardware.memory_bytes) * request.memory_reserve_fraction));
  const std::int64_t free_bytes =
      hardware.memory_bytes - capacity.weight_bytes - capacity.reserve_bytes;
  const std::int64_t block_bytes = capacity.kv_bytes_per_token * capacity.block_size;
  if (request.explicit_blocks > 0) {
    // An explicit count may model less memory than the device has, never more.
    const std::int64_t fits = free_bytes > 0 ? free_bytes / block_bytes : 0;
    if (request.explicit_blocks > fits) {
      throw InputError(
          {"", 0, 0, "scheduler.kv_blocks"},
          fmt::format("expected at most {} blocks ({} has {:.2f} GiB; {:.2f} GiB of {} weights "
                      "and a {:.2f} GiB reserve leave {:.2f} GiB for K/V at {} KiB per block), "
                      "found {} ({:.2f} GiB)",
                      fits, hardware.name, gib(hardware.memory_bytes), gib(capacity.weight_bytes),
                      model.name, gib(capacity.reserve_bytes),
                      gib(std::max<std::int64_t>(0, free_bytes)), block_bytes / 1024,
                      request.explicit_blocks,
                      static_cast<double>(request.explicit_blocks) *
                          static_cast<double>(block_bytes) / static_cast<double>(1 << 30)));
    }
    capacity.blocks = request.explicit_blocks;
    return capacity;
  }
  if (free_bytes < block_bytes) {
    throw InputError(
        {"", 0, 0, "model"},
        fmt::format("{} needs {:.2f} GiB of weights{} plus a {:.2f} GiB reserve, but {} has "
                    "{:.2f} GiB: no room for KV cache (use more GPUs per replica with "
                    "parallel.tensor, a larger accelerator, a smaller dtype, or lower "
                    "scheduler.memory_reserve_fraction)",
                    model.name, gib(capacity.weight_bytes),
                    request.tensor > 1
                        ? fmt::format(" per GPU at parallel.tensor {}", request.tensor)
                        : std::string(),
                    gib(capacity.reserve_bytes), hardware.name, gib(hardware.memory_bytes)));
  }
  capacity.blocks = free_bytes / block_bytes;
  return capacity;
}

}  // namespace exitsim::sim
