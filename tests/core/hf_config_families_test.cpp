// What the served models' configs hold that exitsim does not model is refused on one line naming
// the config's key, what was expected and what was found (docs/scenario.md, "Hugging Face
// configs"); their weights and prices are checked in tests/sim/hf_*_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/core/hf_config.hpp"

namespace exitsim {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_hf_config(text, "m/config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// `text` with `from` replaced by `to` (once; the key must be there).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// Abridged configs: deepseek-ai/DeepSeek-V2-Lite, google/gemma-3-1b-it, a Llama 4 text_config
// (Llama-4-Scout's, abridged) and openai-community/gpt2.
constexpr const char* k_deepseek = R"({"model_type": "deepseek_v2", "hidden_size": 2048,
  "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2,
  "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
  "first_k_dense_replace": 1, "q_lora_rank": null, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "v_head_dim": 128, "vocab_size": 102400})";
constexpr const char* k_gemma3 = R"({"model_type": "gemma3_text", "head_dim": 256,
  "hidden_size": 1152, "intermediate_size": 6912, "max_position_embeddings": 32768,
  "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
  "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144})";
constexpr const char* k_llama4 = R"({"model_type": "llama4", "text_config": {
  "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120, "intermediate_size": 8192,
  "intermediate_size_mlp": 16384, "interleave_moe_layer_step": 1, "max_position_embeddings": 10485760,
  "no_rope_layers": [], "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
  "num_key_value_heads": 8, "num_local_experts": 16, "vocab_size": 202048}})";
constexpr const char* k_gpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12,
  "n_inner": null, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257})";

struct Refused {
  const char* name;
  std::string text;
  const char* expected;
};

class HfConfigFamilyRefusal : public testing::TestWithParam<Refused> {};

TEST_P(HfConfigFamilyRefusal, OneLineNamingTheKey) {
  EXPECT_EQ(error_of(GetParam().text), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, HfConfigFamilyRefusal,
    testing::Values(
        Refused{"DeepSeekWithoutItsLatent", edited(k_deepseek, R"("kv_lora_rank": 512,)", ""),
                "m/config.json: kv_lora_rank: expected an integer in [1, 4194304], found none"},
        Refused{
            "DeepSeekFirstDenseLayersPastTheStack",
            edited(k_deepseek, R"("first_k_dense_replace": 1)", R"("first_k_dense_replace": 28)"),
            "m/config.json: first_k_dense_replace: expected an integer in [0, 27], found 28"},
        Refused{"BidirectionalGemma3",
                edited(k_gemma3, R"("sliding_window": 512,)",
                       R"("sliding_window": 512, "use_bidirectional_attention": true,)"),
                "m/config.json: use_bidirectional_attention: expected false (causal attention; "
                "EmbeddingGemma's bidirectional window is not read), found true"},
        Refused{"Gemma3LayerTypeOfAnotherModel",
                edited(k_gemma3, R"("sliding_window": 512,)",
                       R"("sliding_window": 512, "layer_types": ["chunked_attention"],)"),
                "m/config.json: layer_types: expected a list of 26 names, each one of "
                "sliding_attention, full_attention, found [\"chunked_attention\"]"},
        Refused{"Llama4WithoutTextConfig", R"({"model_type": "llama4"})",
                "m/config.json: text_config: expected an object (the language model's config), "
                "found none"},
        Refused{"Llama4KeysAreNamedInsideTextConfig",
                edited(k_llama4, R"("num_local_experts": 16)", R"("num_local_experts": 0)"),
                "m/config.json: text_config.num_local_experts: expected an integer in [1, "
                "65536], found 0"},
        Refused{"Llama4NoRopeLayersOfTheWrongLength",
                edited(k_llama4, R"("no_rope_layers": [])", R"("no_rope_layers": [1, 0])"),
                "m/config.json: text_config.no_rope_layers: expected a list of 48 integers in "
                "[0, 1], found [1,0]"},
        Refused{"Llama4MoeLayerOutsideTheStack",
                edited(k_llama4, R"("interleave_moe_layer_step": 1)", R"("moe_layers": [48])"),
                "m/config.json: text_config.moe_layers: expected a list of layer indices in [0, "
                "47], found 48"},
        Refused{"QuantizedLlama4",
                edited(k_llama4, R"({"model_type": "llama4",)",
                       R"({"model_type": "llama4", "quantization_config": {"bits": 8},)"),
                "m/config.json: quantization_config: expected none (a quantized checkpoint's "
                "weights are not torch_dtype's; give model.dtype and the shape keys instead), "
                "found an object"},
        Refused{"Gpt2WithCrossAttention",
                edited(k_gpt2, R"("n_layer": 12)", R"("n_layer": 12, "add_cross_attention": true)"),
                "m/config.json: add_cross_attention: expected false (a decoder-only model; "
                "cross-attention layers are not read), found true"},
        Refused{"Gpt2HeadsNotDividingTheWidth",
                edited(k_gpt2, R"("n_head": 12)", R"("n_head": 10)"),
                "m/config.json: n_head: expected a divisor of n_embd (768), found 10"},
        Refused{"QwenSlidingWindowOn",
                R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                    "max_position_embeddings": 32768, "num_attention_heads": 28,
                    "num_hidden_layers": 28, "num_key_value_heads": 4, "sliding_window": 4096,
                    "use_sliding_window": true, "vocab_size": 152064})",
                "m/config.json: use_sliding_window: expected false (Qwen's sliding window from "
                "max_window_layers on is not read), found true"}),
    [](const testing::TestParamInfo<Refused>& param_info) { return param_info.param.name; });

// Gemma 3's multimodal configs leave keys to Gemma3TextConfig's defaults (google/gemma-3-4b-it's
// text_config gives neither heads, head_dim, vocab_size nor max_position_embeddings):
// transformers' values, 8 heads of 256, 4 K/V heads, 262208 tokens and 131072 positions.
TEST(HfConfigFamilies, Gemma3MultimodalConfigsTakeTheTextConfigsDefaults) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "gemma3", "torch_dtype": "bfloat16", "text_config": {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
        "num_hidden_layers": 34, "sliding_window": 1024}})",
      "gemma-3-4b-it/config.json");
  EXPECT_EQ(m.n_heads, 8);
  EXPECT_EQ(m.n_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.vocab, 262208);
  EXPECT_EQ(m.max_context, 131072);
  EXPECT_EQ(m.window.tokens, 1024);
  EXPECT_EQ(m.dtype, DType::bf16);  // the top level's torch_dtype
  EXPECT_TRUE(m.tied_embeddings);
}

// Mistral 7B v0.1's sliding window (4096) applies to every layer.
TEST(HfConfigFamilies, MistralsSlidingWindowIsOnEveryLayer) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
          "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
          "num_key_value_heads": 8, "sliding_window": 4096, "vocab_size": 32000})",
      "mistral-7b-v0.1/config.json");
  EXPECT_EQ(m.window.tokens, 4096);
  EXPECT_EQ(m.windowed_layers, std::vector<bool>(32, true));
}

}  // namespace
}  // namespace exitsim
