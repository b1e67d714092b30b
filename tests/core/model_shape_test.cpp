#include "exitsim/core/model_shape.hpp"

#include <gtest/gtest.h>

#include "exitsim/core/model_validation.hpp"
#include "exitsim/core/parallel.hpp"
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
                    PublishedCount{"tinyllama-1.1b", 1.100e9}, PublishedCount{"pythia-1b", 1.012e9},
                    // The served models' cards (Hugging Face's count where the card rounds
                    // to the model's name): Llama 3.1 8B 8.03B, 70B 70.6B, 405B 406B; Qwen2.5
                    // 7.61B and 72.7B; Mistral 7B v0.3 7.25B; Mixtral 46.7B and 141B, all
                    // experts counted.
                    PublishedCount{"llama-3.1-8b", 8.03e9}, PublishedCount{"llama-3.1-70b", 70.6e9},
                    PublishedCount{"llama-3.1-405b", 406e9}, PublishedCount{"qwen2.5-7b", 7.61e9},
                    PublishedCount{"qwen2.5-72b", 72.7e9}, PublishedCount{"mistral-7b", 7.25e9},
                    PublishedCount{"mixtral-8x7b", 46.7e9}, PublishedCount{"mixtral-8x22b", 141e9}),
    [](const testing::TestParamInfo<PublishedCount>& param_info) {
      std::string name = param_info.param.preset;
      for (char& c : name) {
        if (c == '-' || c == '.')
          c = '_';
      }
      return name;
    });

TEST(ModelShape, MixtralActiveParametersMatchTheCardsAndCountTopKExpertsPerLayer) {
  // Mistral AI's announcements: Mixtral 8x7B uses 12.9B of its 46.7B parameters per token,
  // 8x22B 39B of 141B.
  const ModelShape small = preset("mixtral-8x7b");
  const ModelShape large = preset("mixtral-8x22b");
  EXPECT_NEAR(static_cast<double>(small.active_parameters_per_token()) / 12.9e9, 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(large.active_parameters_per_token()) / 39e9, 1.0, 0.01);
  // All 8 experts are held, 2 per layer run: the difference is 6 experts in each of 32 layers.
  EXPECT_EQ(small.parameter_count() - small.active_parameters_per_token(),
            32 * 6 * small.mlp_parameters());
  EXPECT_EQ(small.mlp_parameters(), 3 * 4096 * 14336);
  EXPECT_EQ(small.router_parameters(), 4096 * 8);
  // With one expert and no router it would be Mistral 7B's shape (Mixtral has 32000 tokens).
  ModelShape dense = small;
  dense.experts = 0;
  dense.experts_per_token = 0;
  dense.vocab = 32768;
  EXPECT_EQ(dense.parameter_count(), preset("mistral-7b").parameter_count());
  EXPECT_EQ(dense.active_parameters_per_token(), dense.parameter_count());
  EXPECT_EQ(small.weight_bytes(), 2 * small.parameter_count());
}

TEST(ModelShape, ServedPresetsKeepTheirConfigContextWindowsAndShapes) {
  EXPECT_EQ(preset("llama-3.1-8b").max_context, 131072);
  EXPECT_EQ(preset("llama-3.1-70b").max_context, 131072);
  EXPECT_EQ(preset("llama-3.1-405b").max_context, 131072);
  EXPECT_EQ(preset("qwen2.5-7b").max_context, 32768);
  EXPECT_EQ(preset("qwen2.5-72b").max_context, 32768);
  EXPECT_EQ(preset("mistral-7b").max_context, 32768);
  EXPECT_EQ(preset("mixtral-8x7b").max_context, 32768);
  EXPECT_EQ(preset("mixtral-8x22b").max_context, 65536);
  // Llama 3.1 8B is Llama 3 8B with a longer context.
  ModelShape llama31 = preset("llama-3.1-8b");
  llama31.name = "llama-3-8b";
  llama31.max_context = 8192;
  EXPECT_EQ(llama31, preset("llama-3-8b"));
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen2.5-7b",
                           "qwen2.5-72b", "mistral-7b"}) {
    EXPECT_FALSE(preset(name).is_moe()) << name;
    EXPECT_FALSE(preset(name).tied_embeddings) << name;
  }
  EXPECT_EQ(preset("mixtral-8x22b").experts, 8);
  EXPECT_EQ(preset("mixtral-8x22b").experts_per_token, 2);
  // Llama 3.1 405B: 8 K/V heads of 128 in bf16 are 4 KiB per token per layer.
  EXPECT_EQ(preset("llama-3.1-405b").kv_bytes_per_token_per_layer(), 4096);
}

TEST(ModelShape, ExpectedDistinctExpertsGrowFromTopKToAllExperts) {
  // One token reads exactly its top-k; a batch reads at most all experts.
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 1), 2.0);
  // 8 x (1 - 0.75^4) for four tokens.
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 2, 4), 8 * (1 - 0.31640625));
  EXPECT_NEAR(expected_distinct_experts(8, 2, 256), 8.0, 1e-12);
  // Top-k = all experts: every token reads every expert.
  EXPECT_DOUBLE_EQ(expected_distinct_experts(8, 8, 1), 8.0);
  EXPECT_EQ(expected_distinct_experts(0, 0, 16), 0.0);
  EXPECT_EQ(expected_distinct_experts(8, 2, 0), 0.0);
}

TEST(ModelShape, ExpertCountsAreValidated) {
  ModelShape m = preset("mixtral-8x7b");
  EXPECT_FALSE(find_shape_problem(m).has_value());
  m.experts_per_token = 9;
  auto problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "experts_per_token");
  EXPECT_EQ(problem->message, "expected an integer in [1, 8] (the experts), found 9");
  m.experts_per_token = 0;
  problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->message, "expected an integer in [1, 8] (the experts), found 0");
  m.experts = 0;
  m.experts_per_token = 2;
  problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "experts_per_token");
  EXPECT_EQ(problem->message, "expected 0 for a dense MLP (experts is 0), found 2");
  m.experts = -1;
  problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "experts");
  // A recursive mixture may share its block, but not carry LoRA adapters.
  m = preset("mixtral-8x7b");
  m.depth = DepthStructure{};
  m.depth.block_layers = 16;
  m.depth.recursions = 2;
  EXPECT_FALSE(find_shape_problem(m).has_value());
  m.depth.lora_rank = {0, 8};
  problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "depth.lora_rank");
}

// The N3 reproducer: every key within its documented range (d_model <= 2^20, ffn_dim <= 2^22,
// experts <= 65536), the weights past int64. Refused at the largest part's key, not wrapped.
TEST(ModelShape, WeightsPastTheSizeBoundAreRefusedNamingTheLargestPart) {
  ModelShape m = preset("mixtral-8x7b");
  m.d_model = 1 << 20;
  m.ffn_dim = 1 << 22;
  m.experts = 65536;
  m.depth = DepthStructure::plain(6);
  m.vocab = 32000;
  const auto problem = find_shape_problem(m);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "experts");
  EXPECT_EQ(problem->message,
            "expected a model of at most 2^62 bytes of weights (4 EiB), found about "
            "1.04e+19 bytes: 6 layers x (1.07e+10 attention + 8.65e+17 MLP "
            "parameters) + 0 LoRA + 6.71e+10 embedding and LM head parameters, at 2 "
            "bytes (bf16)");
  m.experts = 8;
  m.ffn_dim = 1;
  m.n_heads = 4096;
  m.n_kv_heads = 4096;
  m.head_dim = 4096;
  m.depth = DepthStructure::plain(100000);
  const auto attention = find_shape_problem(m);
  ASSERT_TRUE(attention.has_value());
  EXPECT_EQ(attention->field, "n_heads");
}

// A shape of one layer whose parameters are 2 x ffn_dim + 9 (d_model, heads, head_dim and vocab
// 1; two plain MLP matrices; the LM head counted apart), one byte each: its weights can be put
// on either side of the 2^62-byte bound exactly.
ModelShape one_wide_mlp(std::int64_t ffn_dim) {
  ModelShape m;
  m.name = "wide";
  m.d_model = m.n_heads = m.n_kv_heads = m.head_dim = m.vocab = 1;
  m.ffn_dim = ffn_dim;
  m.mlp = MlpKind::plain;
  m.dtype = DType::fp8;
  m.depth = DepthStructure::plain(1);
  return m;
}

TEST(ModelShape, WeightsAtTheSizeBoundAreAcceptedAndSizedWithoutWrapping) {
  constexpr std::int64_t k_bound = std::int64_t{1} << 62;
  const ModelShape at = one_wide_mlp((k_bound - 9) / 2);  // 2^62 - 1 bytes
  EXPECT_FALSE(find_shape_problem(at).has_value());
  EXPECT_EQ(at.weight_bytes(), k_bound - 1);
  EXPECT_EQ(TensorShard::of(at, 1, false).weight_bytes(at), k_bound - 1);
  const ModelShape past = one_wide_mlp((k_bound - 9) / 2 + 1);  // 2^62 + 1 bytes
  const auto problem = find_shape_problem(past);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "ffn_dim");
  EXPECT_EQ(problem->message,
            "expected a model of at most 2^62 bytes of weights (4 EiB), found about "
            "4.61e+18 bytes: 1 layers x (4 attention + 4.61e+18 MLP parameters) + 0 "
            "LoRA + 2 embedding and LM head parameters, at 1 bytes (fp8)");
}

TEST(ModelShape, KvBytesPerTokenUseKvHeadsAndDtype) {
  // Llama-3-8B: 8 KV heads x 128 dims x (K and V) x 2 bytes = 4 KiB per token per layer.
  EXPECT_EQ(preset("llama-3-8b").kv_bytes_per_token_per_layer(), 4096);
  // Context windows: the models' max_position_embeddings; variants keep their base's.
  EXPECT_EQ(preset("llama-3-8b").max_context, 8192);
  EXPECT_EQ(preset("llama-2-7b").max_context, 4096);
  EXPECT_EQ(preset("layerskip-llama-2-7b").max_context, 4096);
  EXPECT_EQ(preset("smollm-360m").max_context, 2048);
  EXPECT_EQ(preset("mor-smollm-360m-r3").max_context, 2048);
  EXPECT_EQ(preset("rrt-gemma-1b").max_context, 8192);
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

// Mixture-of-Recursions presets: Middle-Cycle around a shared block, the layer count adjusted
// where (layers - 2) does not divide by N_r (see core/src/presets.cpp).
struct MorPreset {
  const char* preset;
  int layers;  // after adjustment
  int recursions;
};

class MorPresetDepth : public testing::TestWithParam<MorPreset> {};

TEST_P(MorPresetDepth, IsMiddleCycle) {
  const auto& [name, layers, recursions] = GetParam();
  const DepthStructure d = preset(name).depth;
  EXPECT_EQ(d, DepthStructure::middle_cycle(layers, recursions)) << name;
  EXPECT_EQ(d.prelude_layers, 1);
  EXPECT_EQ(d.coda_layers, 1);
  EXPECT_EQ(d.recursions, recursions);
  EXPECT_EQ(d.full_depth(), layers);
  EXPECT_EQ(d.effective_exit_points().size(), static_cast<std::size_t>(recursions));
  EXPECT_EQ(d.effective_exit_points().back(), layers - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, MorPresetDepth,
    testing::Values(MorPreset{"mor-smollm-135m-r2", 30, 2}, MorPreset{"mor-smollm-135m-r3", 29, 3},
                    MorPreset{"mor-smollm-135m-r4", 30, 4}, MorPreset{"mor-smollm-360m-r2", 32, 2},
                    MorPreset{"mor-smollm-360m-r3", 32, 3}, MorPreset{"mor-smollm-360m-r4", 34, 4},
                    MorPreset{"mor-smollm-1.7b-r2", 24, 2}, MorPreset{"mor-smollm-1.7b-r3", 23, 3},
                    MorPreset{"mor-smollm-1.7b-r4", 26, 4}),
    [](const testing::TestParamInfo<MorPreset>& param_info) {
      std::string name = param_info.param.preset;
      for (char& c : name) {
        if (c == '-' || c == '.')
          c = '_';
      }
      return name;
    });

TEST(DepthPresets, MorKeepsTheBaseShape) {
  ModelShape mor = preset("mor-smollm-360m-r3");
  EXPECT_EQ(mor.depth.block_layers, 10);
  mor.depth = preset("smollm-360m").depth;
  mor.name = "smollm-360m";
  EXPECT_EQ(mor, preset("smollm-360m"));
}

std::int64_t non_embedding_parameters(const ModelShape& m) {
  const std::int64_t embedding = m.vocab * m.d_model;
  return m.parameter_count() - (m.tied_embeddings ? embedding : 2 * embedding);
}

TEST(DepthPresets, RecursiveGemmaLoopsOneBlockOfNineTwice) {
  const ModelShape m = preset("rrt-gemma-1b");
  EXPECT_EQ(m.depth.prelude_layers, 0);
  EXPECT_EQ(m.depth.block_layers, 9);
  EXPECT_EQ(m.depth.recursions, 2);
  EXPECT_EQ(m.depth.coda_layers, 0);
  EXPECT_TRUE(m.depth.lora_rank.empty());
  EXPECT_EQ(m.depth.effective_exit_points(), (std::vector<int>{9, 18}));
  // Relaxed Recursive Transformers, Table K.1: 0.99B non-embedding parameters for B = 2.
  EXPECT_NEAR(static_cast<double>(non_embedding_parameters(m)) / 0.99e9, 1.0, 0.01);
  EXPECT_EQ(m.d_model, preset("gemma-2b").d_model);
}

TEST(DepthPresets, RelaxedRecursiveGemmaAddsRank64LoraPerLoop) {
  const ModelShape m = preset("rrt-gemma-1b-lora64");
  EXPECT_EQ(m.depth.lora_rank, (std::vector<int>{64, 64}));
  EXPECT_EQ(m.depth.block_layers, 9);
  EXPECT_EQ(m.depth.recursions, 2);
  // Table K.1: 1.07B non-embedding parameters for B = 2, r = 64.
  EXPECT_NEAR(static_cast<double>(non_embedding_parameters(m)) / 1.07e9, 1.0, 0.01);
}

TEST(DepthPresets, LayerSkipLlamaExitsEveryEightLayers) {
  const ModelShape m = preset("layerskip-llama-2-7b");
  EXPECT_FALSE(m.depth.is_recursive());
  EXPECT_EQ(m.depth.full_depth(), 32);
  EXPECT_EQ(m.depth.effective_exit_points(), (std::vector<int>{8, 16, 24, 32}));
  EXPECT_EQ(m.parameter_count(), preset("llama-2-7b").parameter_count());
}

TEST(DepthPresets, ExistingPresetsComeFirstAndNamesAreUnique) {
  const std::vector<std::string> names = model_preset_names();
  ASSERT_GE(names.size(), 8u);
  EXPECT_EQ(names[0], "llama-3-8b");
  EXPECT_EQ(names[7], "pythia-1b");
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (std::size_t j = i + 1; j < names.size(); ++j)
      EXPECT_NE(names[i], names[j]);
  }
}

}  // namespace
}  // namespace exitsim
