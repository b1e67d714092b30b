// model.hf_config: a Hugging Face config.json as the model's shape, under the explicit keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace exitsim::scenario {
namespace {

using test_support::error_of;

// mistralai/Mixtral-8x7B-Instruct-v0.1's config.json, abridged to the keys that matter.
constexpr const char* k_mixtral = R"({
  "_name_or_path": "mistralai/Mixtral-8x7B-Instruct-v0.1",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 32000
})";

class HfConfigScenario : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("exitsim_hf_config_scenario_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

void expect_round_trip(const Scenario& s) {
  const std::string text = render_resolved_yaml(s);
  const Scenario again = load_scenario_text(text, "<rendered>");
  EXPECT_TRUE(again == s) << text;
  EXPECT_EQ(render_resolved_yaml(again), text);
}

TEST_F(HfConfigScenario, TheConfigGivesTheShapeAndExplicitKeysOverrideIt) {
  const std::string path = write("config.json", k_mixtral);
  const Scenario s = load_scenario_text(
      "model:\n  hf_config: " + path + "\n  max_context: 4096\n  dtype: fp8\n", "s.yaml");
  EXPECT_EQ(s.model.hf_config, path);
  EXPECT_EQ(s.model.preset, "");
  EXPECT_EQ(s.model.shape.name, "mistralai/Mixtral-8x7B-Instruct-v0.1");
  EXPECT_EQ(s.model.shape.experts, 8);
  EXPECT_EQ(s.model.shape.experts_per_token, 2);
  EXPECT_EQ(s.model.shape.max_context, 4096);
  EXPECT_EQ(s.model.shape.dtype, DType::fp8);
  ModelShape expected = *find_model_preset("mixtral-8x7b");
  expected.name = s.model.shape.name;
  expected.max_context = 4096;
  expected.dtype = DType::fp8;
  EXPECT_EQ(s.model.shape, expected);
  expect_round_trip(s);
}

TEST_F(HfConfigScenario, ItReplacesThePresetsShapeAsTheCommandLineGivesIt) {
  // The default scenario names a preset (llama-3-8b); --set model.hf_config replaces its shape.
  const std::string path = write("config.json", k_mixtral);
  const std::vector<std::string> set = {"model.hf_config=" + path};
  const Scenario s = load_default_scenario(set);
  EXPECT_EQ(s.model.preset, "");
  EXPECT_EQ(s.model.shape.d_model, 4096);
  EXPECT_EQ(s.model.shape.experts, 8);
  EXPECT_EQ(s.model.shape.vocab, 32000);
  expect_round_trip(s);
}

TEST_F(HfConfigScenario, WhatIsWrongInsideTheConfigNamesTheConfigAndItsKey) {
  std::string text = k_mixtral;
  text.replace(text.find("\"mixtral\""), 9, "\"bert\"");
  const std::string path = write("config.json", text);
  EXPECT_EQ(error_of("model:\n  hf_config: " + path + "\n"),
            path +
                ": model_type: expected one of llama, qwen2, qwen3, qwen3_moe, mistral, mixtral, "
                "gemma, gemma2, gemma3, gemma3_text, deepseek_v2, deepseek_v3, llama4, "
                "llama4_text, gpt2, found \"bert\"");
  // A folder is not a config file.
  EXPECT_EQ(error_of("model:\n  hf_config: " + dir_.string() + "\n"),
            "s.yaml:2:14: model.hf_config: expected the path of a Hugging Face config.json file, "
            "found \"" +
                dir_.string() + "\" (not a regular file)");
}

// google/gemma-2-9b's config gives each of its 42 layers its attention's span: a depth key that
// changes the layers is refused, naming it, rather than leaving layers without one.
TEST_F(HfConfigScenario, AConfigsPerLayerSpansFixItsLayers) {
  const std::string path = write("config.json", R"({"model_type": "gemma2", "head_dim": 256,
    "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
    "sliding_window": 4096, "vocab_size": 256000})");
  EXPECT_EQ(error_of("model:\n  hf_config: " + path + "\n  depth:\n    prelude: 40\n"),
            "s.yaml:4:14: model.depth.prelude: expected 42 layers (the config gives each layer its "
            "attention's span), found 40");
  const Scenario s = load_scenario_text("model:\n  hf_config: " + path + "\n", "s.yaml");
  EXPECT_EQ(s.model.shape.windowed_layers.size(), 42U);
  expect_round_trip(s);
}

// DeepSeek-V2-Lite's shared experts and dense first layer are its mixture's: model.experts: 0
// leaves them nowhere, and is refused at that key.
TEST_F(HfConfigScenario, AConfigsSharedExpertsNeedItsMixture) {
  const std::string path = write("config.json", R"({"model_type": "deepseek_v2",
    "hidden_size": 2048, "intermediate_size": 10944, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "moe_intermediate_size": 1408, "n_routed_experts": 64,
    "n_shared_experts": 2, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 27, "first_k_dense_replace": 1, "q_lora_rank": null,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400})");
  EXPECT_EQ(error_of("model:\n  hf_config: " + path + "\n  experts: 0\n  experts_per_token: 0\n"),
            "s.yaml:3:12: model.experts: expected a mixture of experts (the config's shared "
            "experts and dense layers are a mixture's), found 0");
  const Scenario s = load_scenario_text("model:\n  hf_config: " + path + "\n", "s.yaml");
  EXPECT_EQ(s.model.shape.shared_experts, 2);
  EXPECT_EQ(s.model.shape.kv_bytes_per_token_per_layer(), 1152);
  expect_round_trip(s);
}

TEST_F(HfConfigScenario, ExpertKeysMakeAPresetAMixture) {
  const Scenario s = load_scenario_text(
      "model:\n  preset: mistral-7b\n  experts: 8\n  experts_per_token: 2\n", "s.yaml");
  EXPECT_TRUE(s.model.shape.is_moe());
  EXPECT_EQ(s.model.shape.experts, 8);
  expect_round_trip(s);
  EXPECT_EQ(load_default_scenario(std::vector<std::string>{"model.preset=mixtral-8x22b"})
                .model.shape.experts_per_token,
            2);
}

}  // namespace
}  // namespace exitsim::scenario
