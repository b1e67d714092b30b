#include "exitsim/sim/kv_capacity.hpp"

#include <fmt/format.h>

#include <cmath>

#include "exitsim/core/error.hpp"

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
  capacity.weight_bytes = model.weight_bytes();
  const int kv_layers = request.kv_layers > 0 ? request.kv_layers : model.depth.full_depth();
  capacity.kv_bytes_per_token = model.kv_bytes_per_token_per_layer() * kv_layers;
  capacity.reserve_bytes = static_cast<std::int64_t>(
      std::llround(static_cast<double>(hardware.memory_bytes) * request.memory_reserve_fraction));
  if (request.explicit_blocks > 0) {
    capacity.blocks = request.explicit_blocks;
    return capacity;
  }
  const std::int64_t free_bytes =
      hardware.memory_bytes - capacity.weight_bytes - capacity.reserve_bytes;
  const std::int64_t block_bytes = capacity.kv_bytes_per_token * capacity.block_size;
  if (free_bytes < block_bytes) {
    throw InputError(
        {"", 0, 0, "model"},
        fmt::format("{} needs {:.2f} GiB of weights plus a {:.2f} GiB reserve, but {} has {:.2f} "
                    "GiB: no room for KV cache (use a larger accelerator, a smaller dtype, or "
                    "lower scheduler.memory_reserve_fraction)",
                    model.name, gib(capacity.weight_bytes), gib(capacity.reserve_bytes),
                    hardware.name, gib(hardware.memory_bytes)));
  }
  capacity.blocks = free_bytes / block_bytes;
  return capacity;
}

}  // namespace exitsim::sim
