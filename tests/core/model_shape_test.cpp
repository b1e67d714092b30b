#include "exitsim/core/model_shape.hpp"

#include <gtest/gtest.h>

#include "exitsim/core/presets.hpp"

namespace exitsim {
namespace {

ModelShape preset(const char* name) {
  auto shape = find_model_preset(name);
  EXPECT_TRUE(shape.has_value()) << name;
  return shape.value_or(ModelShape{});
}

// Parameter counts the model cards publish; a preset whose shape is wrong misses them by far more
// than the 1% allowed (which covers biases and rotary buffers the cards count differently).
struct PublishedCount {
  const char* preset;
  double parameters;
};

class PresetParameterCount : public testing::TestWithParam<PublishedCount> {};

TEST_P(PresetParameterCount, MatchesModelCard) {
  const auto& [name, published] = GetParam();
  const double counted = static_cast<double>(preset(name).parameter_count());
  EXPECT_NEAR(counted / published, 1.0, 0.01) << name << " counted " << counted;
}

INSTANTIATE_TEST_SUITE_P(
    Presets, PresetParameterCount,
    testing::Values(PublishedCount{"llama-3-8b", 8.03e9}, PublishedCount{"llama-2-7b", 6.74e9},
                    PublishedCount{"smollm-135m", 134.5e6}, PublishedCount{"smollm-360m", 361.8e6},
                    PublishedCount{"smollm-1.7b", 1.711e9}, PublishedCount{"gemma-2b", 2.506e9},
                    PublishedCount{"tinyllama-1.1b", 1.100e9},
                    PublishedCount{"pythia-1b", 1.012e9}),
    [](const testing::TestParamInfo<PublishedCount>& param_info) {
      std::string name = param_info.param.preset;
      for (char& c : name) {
        if (c == '-' || c == '.')
          c = '_';
      }
      return name;
    });

TEST(ModelShape, KvBytesPerTokenUseKvHeadsAndDtype) {
  // Llama-3-8B: 8 KV heads x 128 dims x (K and V) x 2 bytes = 4 KiB per token per layer.
  EXPECT_EQ(preset("llama-3-8b").kv_bytes_per_token_per_layer(), 4096);
}

TEST(DepthStructure, PlainModelHasOnlyFullDepthExit) {
  const DepthStructure d = DepthStructure::plain(32);
  EXPECT_FALSE(d.is_recursive());
  EXPECT_EQ(d.full_depth(), 32);
  EXPECT_EQ(d.unique_layers(), 32);
  EXPECT_EQ(d.effective_exit_points(), std::vector<int>{32});
}

TEST(DepthStructure, MiddleCycleExitsAtEndsOfRecursions) {
  // Mixture-of-Recursions on SmolLM-360M: 32 layers, N_r = 3 -> 1 + 10 x 3 + 1.
  const DepthStructure d = DepthStructure::middle_cycle(32, 3);
  EXPECT_EQ(d.block_layers, 10);
  EXPECT_EQ(d.stacked_depth(), 31);
  EXPECT_EQ(d.full_depth(), 32);
  EXPECT_EQ(d.unique_layers(), 12);
  EXPECT_EQ(d.effective_exit_points(), (std::vector<int>{11, 21, 31}));
  EXPECT_EQ(d.recursion_of_depth(1), 0);
  EXPECT_EQ(d.recursion_of_depth(2), 1);
  EXPECT_EQ(d.recursion_of_depth(11), 1);
  EXPECT_EQ(d.recursion_of_depth(12), 2);
  EXPECT_EQ(d.recursion_of_depth(31), 3);
}

TEST(ModelShape, SharedBlockWeightsAreCountedOnceAndLoraPerRecursion) {
  ModelShape m = preset("gemma-2b");
  const std::int64_t plain = m.parameter_count();
  m.depth = DepthStructure{};
  m.depth.block_layers = 9;
  m.depth.recursions = 2;
  const std::int64_t recursive = m.parameter_count();
  EXPECT_EQ(plain - recursive, 9 * m.layer_parameters());
  m.depth.lora_rank = {64, 64};
  EXPECT_EQ(m.parameter_count() - recursive, 2 * 9 * m.lora_parameters(64));
}

}  // namespace
}  // namespace exitsim
