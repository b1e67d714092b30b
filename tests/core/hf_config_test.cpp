// Hugging Face config.json files as model shapes, one per family, written from the published
// configs (meta-llama, Qwen, mistralai and google repositories on the Hub).
#include "exitsim/core/hf_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"

namespace exitsim {
namespace {

// meta-llama/Llama-3.1-70B-Instruct.
constexpr const char* k_llama = R"({
  "_name_or_path": "meta-llama/Llama-3.1-70B-Instruct",
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 8192,
  "initializer_range": 0.02,
  "intermediate_size": 28672,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3",
  "use_cache": true,
  "vocab_size": 128256
})";

// Qwen/Qwen2.5-7B-Instruct (no tie_word_embeddings key: Qwen2Config's default, false).
constexpr const char* k_qwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "intermediate_size": 18944,
  "max_position_embeddings": 32768,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "torch_dtype": "bfloat16",
  "use_sliding_window": false,
  "vocab_size": 152064
})";

// mistralai/Mistral-7B-v0.3.
constexpr const char* k_mistral = R"({
  "architectures": ["MistralForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 32768
})";

// mistralai/Mixtral-8x7B-Instruct-v0.1.
constexpr const char* k_mixtral = R"({
  "architectures": ["MixtralForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mixtral",
  "num_attention_heads": 32,
  "num_experts_per_tok": 2,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "num_local_experts": 8,
  "output_router_logits": false,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.02,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 32000
})";

// google/gemma-7b (GemmaConfig ties the embeddings by default; the file does not say).
constexpr const char* k_gemma = R"({
  "architectures": ["GemmaForCausalLM"],
  "head_dim": 256,
  "hidden_act": "gelu",
  "hidden_size": 3072,
  "intermediate_size": 24576,
  "max_position_embeddings": 8192,
  "model_type": "gemma",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 16,
  "rms_norm_eps": 1e-06,
  "rope_theta": 10000.0,
  "torch_dtype": "bfloat16",
  "vocab_size": 256000
})";

// google/gemma-2-9b: 16 heads of 256 on a 3584-wide model (not hidden_size / heads).
constexpr const char* k_gemma2 = R"({
  "architectures": ["Gemma2ForCausalLM"],
  "attn_logit_softcapping": 50.0,
  "final_logit_softcapping": 30.0,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 3584,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "gemma2",
  "num_attention_heads": 16,
  "num_hidden_layers": 42,
  "num_key_value_heads": 8,
  "query_pre_attn_scalar": 256,
  "sliding_window": 4096,
  "torch_dtype": "float32",
  "vocab_size": 256000
})";

ModelShape preset(const char* name) {
  return find_model_preset(name).value_or(ModelShape{});
}

// The shape with the preset's name, to compare the rest.
ModelShape named(ModelShape shape, const char* name) {
  shape.name = name;
  return shape;
}

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

TEST(HfConfig, LlamaQwenMistralAndMixtralConfigsAreTheirPresets) {
  const ModelShape llama = parse_hf_config(k_llama, "llama/config.json");
  EXPECT_EQ(llama.name, "meta-llama/Llama-3.1-70B-Instruct");
  EXPECT_EQ(named(llama, "llama-3.1-70b"), preset("llama-3.1-70b"));
  EXPECT_EQ(named(parse_hf_config(k_qwen2, "q/config.json"), "qwen2.5-7b"), preset("qwen2.5-7b"));
  EXPECT_EQ(named(parse_hf_config(k_mistral, "m/config.json"), "mistral-7b"), preset("mistral-7b"));
  const ModelShape mixtral = parse_hf_config(k_mixtral, "m/config.json");
  EXPECT_EQ(mixtral.experts, 8);
  EXPECT_EQ(mixtral.experts_per_token, 2);
  EXPECT_EQ(named(mixtral, "mixtral-8x7b"), preset("mixtral-8x7b"));
}

TEST(HfConfig, GemmaTiesEmbeddingsByDefaultAndReadsItsHeadDim) {
  const ModelShape gemma = parse_hf_config(k_gemma, "models/gemma-7b/config.json");
  EXPECT_EQ(gemma.name, "gemma-7b");  // no _name_or_path: the folder's name
  EXPECT_TRUE(gemma.tied_embeddings);
  EXPECT_EQ(gemma.head_dim, 256);
  EXPECT_EQ(gemma.n_kv_heads, 16);
  EXPECT_EQ(gemma.mlp, MlpKind::gated);
  EXPECT_EQ(gemma.depth, DepthStructure::plain(28));
  // google/gemma-7b's card: 8.54B parameters.
  EXPECT_NEAR(static_cast<double>(gemma.parameter_count()) / 8.54e9, 1.0, 0.01);

  const ModelShape gemma2 = parse_hf_config(k_gemma2, "gemma-2-9b/config.json");
  EXPECT_EQ(gemma2.head_dim, 256);
  EXPECT_EQ(gemma2.d_model, 3584);
  EXPECT_EQ(gemma2.dtype, DType::fp32);
  EXPECT_TRUE(gemma2.tied_embeddings);
  EXPECT_EQ(gemma2.max_context, 8192);
  // google/gemma-2-9b's card: 9.24B parameters (tests/sim/hf_sliding_window_test.cpp checks the
  // exact count, its four norms a layer included).
  EXPECT_NEAR(static_cast<double>(gemma2.parameter_count()) / 9.24e9, 1.0, 0.01);
  // A Gemma config must give head_dim: its default (256) is not hidden_size / heads.
  EXPECT_EQ(error_of(edited(k_gemma2, R"("head_dim": 256,)", "")),
            "m/config.json: head_dim: expected an integer in [1, 4096], found none");
}

TEST(HfConfig, DerivedKeysTakeTransformersDefaults) {
  // No num_key_value_heads: multi-head attention. No head_dim (or null): hidden / heads.
  std::string text = edited(k_mistral, R"("num_key_value_heads": 8,)", "");
  text = edited(text, R"("sliding_window": null,)", R"("head_dim": null,)");
  const ModelShape m = parse_hf_config(text, "m/config.json");
  EXPECT_EQ(m.n_kv_heads, 32);
  EXPECT_EQ(m.head_dim, 128);
  // Mistral NeMo's style: an explicit head_dim that is not hidden / heads.
  const ModelShape nemo = parse_hf_config(
      edited(k_mistral, R"("sliding_window": null,)", R"("head_dim": 64,)"), "m/config.json");
  EXPECT_EQ(nemo.head_dim, 64);
  // No torch_dtype: bf16; transformers 5 spells it "dtype".
  EXPECT_EQ(parse_hf_config(edited(k_mistral, R"("torch_dtype": "bfloat16",)", ""), "c").dtype,
            DType::bf16);
  EXPECT_EQ(parse_hf_config(
                edited(k_mistral, R"("torch_dtype": "bfloat16",)", R"("dtype": "float16",)"), "c")
                .dtype,
            DType::fp16);
  // A UTF-8 byte-order mark before the JSON is skipped.
  EXPECT_EQ(parse_hf_config("\xEF\xBB\xBF" + std::string(k_mistral), "c").d_model, 4096);
}

// N3 by the config route: the same mixture as the model.* keys of
// ModelShape.WeightsPastTheSizeBoundAreRefusedNamingTheLargestPart, refused the same way at
// config.json's name for the key; and each dimension is bounded as its scenario key is.
TEST(HfConfig, ShapesAreBoundedAsTheScenarioKeysAre) {
  std::string huge = edited(k_mixtral, R"("hidden_size": 4096)", R"("hidden_size": 1048576)");
  huge = edited(huge, R"("intermediate_size": 14336)", R"("intermediate_size": 4194304)");
  huge = edited(huge, R"("num_local_experts": 8)", R"("num_local_experts": 65536)");
  huge = edited(huge, R"("num_hidden_layers": 32)", R"("num_hidden_layers": 6, "head_dim": 128)");
  EXPECT_EQ(error_of(huge),
            "m/config.json: num_local_experts: expected a model of at most 2^62 "
            "bytes of weights (4 EiB), found about 1.04e+19 bytes: 6 layers x "
            "(1.07e+10 attention + 8.65e+17 MLP parameters) + 0 LoRA + 6.71e+10 "
            "embedding and LM head parameters, at 2 bytes (bf16)");
  EXPECT_EQ(error_of(edited(k_mistral, R"("hidden_size": 4096)", R"("hidden_size": 1048577)")),
            "m/config.json: hidden_size: expected an integer in [1, 1048576], found 1048577");
  EXPECT_EQ(
      error_of(edited(k_mixtral, R"("num_local_experts": 8)", R"("num_local_experts": 65537)")),
      "m/config.json: num_local_experts: expected an integer in [1, 65536], found 65537");
  EXPECT_EQ(
      error_of(edited(k_mistral, R"("num_hidden_layers": 32)", R"("num_hidden_layers": 100001)")),
      "m/config.json: num_hidden_layers: expected an integer in [1, 100000], found 100001");
}

struct BadConfig {
  const char* name;
  std::string text;
  const char* expected;
};

class HfConfigRefusal : public testing::TestWithParam<BadConfig> {};

TEST_P(HfConfigRefusal, OneLineNamingTheFileAndTheKey) {
  EXPECT_EQ(error_of(GetParam().text), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, HfConfigRefusal,
    testing::Values(
        BadConfig{"UnknownModelType",
                  edited(k_mistral, R"("model_type": "mistral")", R"("model_type": "bert")"),
                  "m/config.json: model_type: expected one of llama, qwen2, qwen3, qwen3_moe, "
                  "mistral, mixtral, gemma, gemma2, gemma3, gemma3_text, deepseek_v2, "
                  "deepseek_v3, llama4, llama4_text, gpt2, found \"bert\""},
        BadConfig{"NoModelType", edited(k_mistral, R"("model_type": "mistral",)", ""),
                  "m/config.json: model_type: expected one of llama, qwen2, qwen3, qwen3_moe, "
                  "mistral, mixtral, gemma, gemma2, gemma3, gemma3_text, deepseek_v2, "
                  "deepseek_v3, llama4, llama4_text, gpt2, found none"},
        BadConfig{"MissingKey", edited(k_llama, R"("intermediate_size": 28672,)", ""),
                  "m/config.json: intermediate_size: expected an integer in [1, 4194304], "
                  "found none"},
        BadConfig{"MissingContextWindow",
                  edited(k_qwen2, R"("max_position_embeddings": 32768,)", ""),
                  "m/config.json: max_position_embeddings: expected an integer in [1, "
                  "1000000000], found none"},
        BadConfig{"MixtralWithoutExperts", edited(k_mixtral, R"("num_local_experts": 8,)", ""),
                  "m/config.json: num_local_experts: expected an integer in [1, 65536], "
                  "found none"},
        BadConfig{"MoreExpertsPerTokenThanExperts",
                  edited(k_mixtral, R"("num_experts_per_tok": 2)", R"("num_experts_per_tok": 9)"),
                  "m/config.json: num_experts_per_tok: expected an integer in [1, 8], found 9"},
        BadConfig{"FloatDimension",
                  edited(k_mistral, R"("hidden_size": 4096)", R"("hidden_size": 4096.5)"),
                  "m/config.json: hidden_size: expected an integer in [1, 1048576], found "
                  "4096.5"},
        BadConfig{"StringDimension",
                  edited(k_mistral, R"("num_hidden_layers": 32)", R"("num_hidden_layers": "32")"),
                  "m/config.json: num_hidden_layers: expected an integer in [1, 100000], found "
                  "\"32\""},
        BadConfig{"KvHeadsNotDividingHeads",
                  edited(k_mistral, R"("num_key_value_heads": 8)", R"("num_key_value_heads": 5)"),
                  "m/config.json: num_key_value_heads: expected a divisor of n_heads (32), "
                  "found 5"},
        BadConfig{"HeadDimNotDerivable",
                  edited(k_mistral, R"("hidden_size": 4096)", R"("hidden_size": 4100)"),
                  "m/config.json: head_dim: expected a value, as hidden_size (4100) is not a "
                  "multiple of num_attention_heads (32), found none"},
        BadConfig{"UnknownDtype",
                  edited(k_mistral, R"("torch_dtype": "bfloat16")", R"("torch_dtype": "int4")"),
                  "m/config.json: torch_dtype: expected one of float32, bfloat16, float16, "
                  "found \"int4\""},
        BadConfig{
            "TiedEmbeddingsNotBoolean",
            edited(k_mistral, R"("tie_word_embeddings": false)", R"("tie_word_embeddings": 0)"),
            "m/config.json: tie_word_embeddings: expected true or false, found 0"},
        BadConfig{"QuantizedCheckpoint",
                  edited(k_mistral, R"("vocab_size": 32768)",
                         R"("vocab_size": 32768, "quantization_config": {"bits": 4})"),
                  "m/config.json: quantization_config: expected none (a quantized checkpoint's "
                  "weights are not torch_dtype's; give model.dtype and the shape keys instead), "
                  "found an object"},
        BadConfig{"DuplicateKey",
                  edited(k_mistral, R"("vocab_size": 32768)",
                         R"("vocab_size": 32768, "vocab_size": 32000)"),
                  "m/config.json: expected each key once per object, found the key "
                  "\"vocab_size\" twice"},
        BadConfig{"NotAnObject", "[1, 2]", "m/config.json: expected a JSON object, found [1,2]"},
        BadConfig{"NulByte", std::string("{\"model_type\": \"llama\"}\0{}", 26),
                  "m/config.json: expected JSON text, found a NUL byte at byte 24"}),
    [](const testing::TestParamInfo<BadConfig>& param_info) { return param_info.param.name; });

TEST(HfConfig, MalformedJsonIsRefusedNamingTheFile) {
  const std::string error = error_of("{\"model_type\": \"llama\",");
  EXPECT_EQ(error.rfind("m/config.json: expected valid JSON, found ", 0), 0U) << error;
}

TEST(HfConfig, ReadsAFileAndRefusesAMissingOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "exitsim_hf_config_test" / "Mixtral-8x7B";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "config.json";
  std::ofstream(file) << k_mixtral;
  const ModelShape m = read_hf_config(file.string());
  EXPECT_EQ(m.name, "Mixtral-8x7B");
  EXPECT_EQ(m.experts, 8);
  const std::string missing = (dir / "nothing.json").string();
  try {
    read_hf_config(missing);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              missing + ": expected a readable config.json file, found none");
  }
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace exitsim

namespace exitsim {
namespace {

// Qwen/Qwen3-14B's config.json (../shared/models/hf/qwen3-14b), the keys the shape reads.
constexpr const char* k_qwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "head_dim": 128,
  "hidden_size": 5120,
  "intermediate_size": 17408,
  "max_position_embeddings": 40960,
  "model_type": "qwen3",
  "num_attention_heads": 40,
  "num_hidden_layers": 40,
  "num_key_value_heads": 8,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Qwen/Qwen3-30B-A3B's config.json (../shared/models/hf/qwen3-30b-a3b), likewise.
constexpr const char* k_qwen3_moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "decoder_sparse_step": 1,
  "head_dim": 128,
  "hidden_size": 2048,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 151936
})";

// Qwen3-14B: a Llama-shaped layer with QK-norm. Per layer Q and O are 5120 x 5120 each, K and
// V 5120 x 1024 each, the gated MLP 3 x 5120 x 17408, two norms 5120 each and the two
// head_dim-wide QK norms 128 each: 330,311,936; 40 layers, untied embeddings 2 x 151936 x 5120
// and the final norm: 14,768,307,200 (the model card: 14.8B). K/V: 2 x 8 heads x 128 x 2 bytes =
// 4,096 per layer.
TEST(HfConfig, Qwen3IsALlamaShapedLayerWithItsOwnHeadDim) {
  const ModelShape q = parse_hf_config(k_qwen3, "qwen3-14b/config.json");
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.parameter_count(), 14'768'307'200);
  EXPECT_EQ(q.kv_bytes_per_token_per_layer(), 4'096);
  EXPECT_EQ(q.max_context, 40960);
  EXPECT_FALSE(q.is_moe());
}

// Qwen3-30B-A3B: 128 experts of width 768, 8 a token, every layer a mixture. Per layer Q and O
// are 2048 x 4096 each, K and V 2048 x 512 each, the experts 128 x 3 x 2048 x 768, the router
// 2048 x 128, two norms 2048 each and the QK norms 2 x 128: 623,120,640; 48 layers, untied
// embeddings 2 x 151936 x 2048 and the final norm: 30,532,122,624 (the card: 30.5B). A token runs
// 8 of the 128 experts: 3,353,032,704 active (the card: 3.3B). K/V: 2 x 4 x 128 x 2 = 2,048
// bytes per layer.
TEST(HfConfig, Qwen3MoeReadsItsExpertsAndTheirOwnWidth) {
  const ModelShape q = parse_hf_config(k_qwen3_moe, "qwen3-30b-a3b/config.json");
  EXPECT_EQ(q.experts, 128);
  EXPECT_EQ(q.experts_per_token, 8);
  EXPECT_EQ(q.ffn_dim, 768);
  EXPECT_EQ(q.parameter_count(), 30'532'122'624);
  EXPECT_EQ(q.active_parameters_per_token(), 3'353'032'704);
  EXPECT_EQ(q.kv_bytes_per_token_per_layer(), 2'048);
}

// Dense layers among the mixtures are not a shape exitsim has: refused naming the key.
TEST(HfConfig, Qwen3MoeWithDenseLayersIsRefusedNamingTheKey) {
  const auto error = [](const std::string& text) {
    try {
      parse_hf_config(text, "m/config.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string text = k_qwen3_moe;
  EXPECT_EQ(error(text.replace(text.find(R"("decoder_sparse_step": 1)"), 24,
                               R"("decoder_sparse_step": 2)")),
            "m/config.json: decoder_sparse_step: expected 1 (every layer a mixture; dense layers "
            "between mixtures are not modelled), found 2");
  text = k_qwen3_moe;
  EXPECT_EQ(error(text.replace(text.find(R"("mlp_only_layers": [])"), 21,
                               R"("mlp_only_layers": [0, 47])")),
            "m/config.json: mlp_only_layers: expected [] (every layer a mixture; dense layers "
            "among them are not modelled), found [0,47]");
}

// The one field -> key table of both config.json readers holds what each knew before they
// shared it: core's head_dim and experts, the engine's max_positions (its ModelConfig field for
// max_position_embeddings), and the families' own names (transformers' config classes).
TEST(HfKey, NamesEveryFieldBothReadersReportByItsConfigKey) {
  EXPECT_EQ(hf_key("d_model", "llama"), "hidden_size");
  EXPECT_EQ(hf_key("head_dim", "llama"), "head_dim");
  EXPECT_EQ(hf_key("experts", "mixtral"), "num_local_experts");
  EXPECT_EQ(hf_key("experts_per_token", "mixtral"), "num_experts_per_tok");
  EXPECT_EQ(hf_key("max_positions", "llama"), "max_position_embeddings");
  EXPECT_EQ(hf_key("max_context", "llama"), "max_position_embeddings");
  EXPECT_EQ(hf_key("max_context", "gpt2"), "n_positions");
  EXPECT_EQ(hf_key("experts", "qwen3_moe"), "num_experts");
  EXPECT_EQ(hf_key("head_dim", "deepseek_v3"), "qk_nope_head_dim");
  EXPECT_EQ(hf_key("rms_eps", "llama"), "rms_eps");  // no key of its own: the field
}

}  // namespace
}  // namespace exitsim
