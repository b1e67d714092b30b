#include "exitsim/sim/kv_capacity.hpp"

#include <gtest/gtest.h>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"

namespace exitsim::sim {
namespace {

TEST(KvCapacity, Llama3On80GbLeavesRoomForTheExpectedTokenCount) {
  const ModelShape model = *find_model_preset("llama-3-8b");
  const HardwareSpec hw = *find_hardware_preset("h100-sxm");
  const KvCapacity c = derive_kv_capacity(model, hw, {16, 0, 0.1});
  // 80 GiB - 10% reserve - 14.96 GiB of bf16 weights = 57.0 GiB; 128 KiB per token (32 layers x
  // 4 KiB) -> about 467k tokens.
  EXPECT_EQ(c.kv_bytes_per_token, 32 * 4096);
  EXPECT_EQ(c.blocks,
            (hw.memory_bytes - model.weight_bytes() - c.reserve_bytes) / (16 * 32 * 4096));
  EXPECT_NEAR(static_cast<double>(c.tokens()), 467e3, 5e3);
}

TEST(KvCapacity, ExplicitBlockCountWins) {
  const KvCapacity c = derive_kv_capacity(*find_model_preset("smollm-135m"),
                                          *find_hardware_preset("l40s"), {32, 1000, 0.1});
  EXPECT_EQ(c.blocks, 1000);
  EXPECT_EQ(c.tokens(), 32000);
}

TEST(KvCapacity, ModelLargerThanDeviceMemoryIsAnError) {
  ModelShape big = *find_model_preset("llama-3-8b");
  big.dtype = DType::fp32;  // 32 GB of weights
  HardwareSpec small = *find_hardware_preset("a100-40gb");
  try {
    derive_kv_capacity(big, small, {16, 0, 0.3});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "model: llama-3-8b needs 29.92 GiB of weights plus a 12.00 GiB reserve, but "
                 "a100-40gb has 40.00 GiB: no room for KV cache (use more GPUs per replica with "
                 "parallel.tensor or parallel.pipeline, a larger accelerator, a smaller "
                 "dtype, or lower "
                 "scheduler.memory_reserve_fraction)");
  }
}

}  // namespace
}  // namespace exitsim::sim
