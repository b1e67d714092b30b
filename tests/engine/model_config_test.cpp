#include "exitsim/engine/model_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/error.hpp"

namespace exitsim::engine {
namespace {

const char* const k_tiny = R"({"format": "exitsim-model v1", "name": "tiny-recursive",
  "d_model": 192, "n_heads": 6, "n_kv_heads": 2, "head_dim": 32, "ffn_dim": 512, "vocab": 260,
  "rms_eps": 1e-5, "rope_theta": 10000.0, "max_positions": 4096, "tied_embeddings": true,
  "depth": {"prelude": 1, "block": 1, "recursions": 4, "coda": 1, "lora_rank": [],
            "exit_points": []},
  "routers": false, "tokenizer": "bytes", "weights": "model.safetensors"})";

const char* const k_llama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
  "intermediate_size": 128, "num_hidden_layers": 4, "vocab_size": 100, "rms_norm_eps": 1e-6,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048,
  "hidden_act": "silu", "rope_scaling": null, "attention_bias": false, "torch_dtype": "bfloat16",
  "bos_token_id": 1, "transformers_version": "4.40.0"})";

// k_tiny with `from` replaced by `to` (which must occur).
std::string tiny_with(const std::string& from, const std::string& to) {
  std::string text = k_tiny;
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

std::string tiny_error(const std::string& text) {
  return error_of([&] { parse_exitsim_config(text, "exitsim.json", "models/tiny"); });
}

std::string llama_error(const std::string& text) {
  return error_of([&] { parse_hf_llama_config(text, "config.json", "models/llama"); });
}

std::string llama_with(const std::string& from, const std::string& to) {
  std::string text = k_llama;
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::filesystem::path model_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("exitsim_config_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ModelConfig, ParsesTheTinyRecursiveModel) {
  const ModelConfig c = parse_exitsim_config(k_tiny, "exitsim.json", "models/tiny");
  EXPECT_EQ(c.shape.name, "tiny-recursive");
  EXPECT_EQ(c.shape.d_model, 192);
  EXPECT_EQ(c.shape.n_kv_heads, 2);
  EXPECT_EQ(c.shape.dtype, DType::fp32);
  EXPECT_TRUE(c.shape.tied_embeddings);
  EXPECT_EQ(c.shape.depth.recursions, 4);
  EXPECT_EQ(c.shape.depth.unique_layers(), 3);
  EXPECT_EQ(c.shape.depth.effective_exit_points(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.tokenizer, TokenizerKind::bytes);
  EXPECT_EQ(c.format, ModelFormat::exitsim);
  EXPECT_EQ(c.weights_path(), std::filesystem::path("models/tiny/model.safetensors"));
}

TEST(ModelConfig, DefaultsAndJsonRoundTrip) {
  const std::string minimal = R"({"format": "exitsim-model v1", "d_model": 8, "n_heads": 2,
    "n_kv_heads": 1, "head_dim": 4, "ffn_dim": 16, "vocab": 300,
    "depth": {"prelude": 1, "block": 2, "recursions": 2, "lora_rank": [2, 0],
              "exit_points": [3]}, "routers": true})";
  const ModelConfig c = parse_exitsim_config(minimal, "exitsim.json", "models/small/");
  EXPECT_EQ(c.shape.name, "small");
  EXPECT_EQ(c.max_positions, 4096);
  EXPECT_FALSE(c.shape.tied_embeddings);
  EXPECT_EQ(c.weights, "model.safetensors");
  EXPECT_EQ(c.shape.depth.lora_rank, (std::vector<int>{2, 0}));
  const std::string text = model_config_json(c);
  EXPECT_NE(text.find("\"rms_eps\": 1e-05"), std::string::npos) << text;
  EXPECT_EQ(parse_exitsim_config(text, "exitsim.json", "models/small/"), c);
}

TEST(ModelConfig, UnknownKeysAreErrorsWithASuggestion) {
  EXPECT_EQ(tiny_error(tiny_with("\"d_model\"", "\"d_modle\"")),
            "exitsim.json: d_modle: unknown key \"d_modle\"; did you mean \"d_model\"?");
  EXPECT_EQ(tiny_error(tiny_with("\"recursions\"", "\"recursion\"")),
            "exitsim.json: depth.recursion: unknown key \"recursion\"; did you mean "
            "\"recursions\"?");
  EXPECT_EQ(tiny_error(tiny_with("\"routers\"", "\"xyzzy\"")),
            "exitsim.json: xyzzy: unknown key \"xyzzy\"; expected one of format, name, d_model, "
            "n_heads, n_kv_heads, head_dim, ffn_dim, vocab, rms_eps, rope_theta, rope_scaling, "
            "max_positions, tied_embeddings, depth, routers, tokenizer, weights");
}

TEST(ModelConfig, WrongTypesAndRangesNameTheKey) {
  EXPECT_EQ(tiny_error(tiny_with("\"n_heads\": 6", "\"n_heads\": \"6\"")),
            "exitsim.json: n_heads: expected an integer in [1, 16777216], found the string \"6\"");
  EXPECT_EQ(tiny_error(tiny_with("\"vocab\": 260", "\"vocab\": 2.5")),
            "exitsim.json: vocab: expected an integer in [1, 16777216], found the number 2.5");
  EXPECT_EQ(tiny_error(tiny_with("\"vocab\": 260,", "")),
            "exitsim.json: vocab: expected an integer in [1, 16777216], found none");
  EXPECT_EQ(tiny_error(tiny_with("\"recursions\": 4", "\"recursions\": -1")),
            "exitsim.json: depth.recursions: expected an integer in [0, 65536], found the number "
            "-1");
  EXPECT_EQ(tiny_error(tiny_with("\"rms_eps\": 1e-5", "\"rms_eps\": 0")),
            "exitsim.json: rms_eps: expected a positive number, found the number 0");
  // A float field holds neither 1e300 (it was "found inf") nor 1e-300 (it became 0).
  for (const auto& [eps, shown] : {std::pair{"1e300", "1e+300"}, std::pair{"1e-300", "1e-300"}}) {
    EXPECT_EQ(tiny_error(tiny_with("\"rms_eps\": 1e-5", std::string("\"rms_eps\": ") + eps)),
              std::string("exitsim.json: rms_eps: expected a positive number a float holds, from "
                          "1.2e-38 to 3.4e+38, found the number ") +
                  shown);
  }
  EXPECT_EQ(tiny_error(tiny_with("\"routers\": false", "\"routers\": 0")),
            "exitsim.json: routers: expected true or false, found the number 0");
  EXPECT_EQ(tiny_error(tiny_with("\"lora_rank\": []", "\"lora_rank\": [1, \"2\"]")),
            "exitsim.json: depth.lora_rank: expected an array of integers in [0, 65536], found "
            "the string \"2\" in the array");
  EXPECT_EQ(tiny_error(tiny_with("\"tokenizer\": \"bytes\"", "\"tokenizer\": \"byte\"")),
            "exitsim.json: tokenizer: expected \"bytes\", \"ids\" or \"bpe\", found \"byte\" (did "
            "you mean "
            "\"bytes\"?)");
  EXPECT_EQ(tiny_error(tiny_with("\"exitsim-model v1\"", "\"exitsim-model v2\"")),
            "exitsim.json: format: expected \"exitsim-model v1\", found the string "
            "\"exitsim-model v2\"");
}

TEST(ModelConfig, InconsistentShapes) {
  EXPECT_EQ(tiny_error(tiny_with("\"n_kv_heads\": 2", "\"n_kv_heads\": 4")),
            "exitsim.json: n_kv_heads: expected a divisor of n_heads (6), found 4");
  EXPECT_EQ(tiny_error(tiny_with("\"exit_points\": []", "\"exit_points\": [2, 9]")),
            "exitsim.json: depth.exit_points: expected exit points in [1, 5], found 9");
  EXPECT_EQ(tiny_error(tiny_with("\"lora_rank\": []", "\"lora_rank\": [4]")),
            "exitsim.json: depth.lora_rank: expected one rank per recursion (4), found 1");
  EXPECT_EQ(tiny_error(tiny_with("\"head_dim\": 32", "\"head_dim\": 31")),
            "exitsim.json: head_dim: expected an even number (rotary embeddings rotate pairs), "
            "found 31");
  EXPECT_EQ(tiny_error(tiny_with("\"vocab\": 260", "\"vocab\": 100")),
            "exitsim.json: vocab: expected at least 256 for the \"bytes\" tokenizer, found 100");
  EXPECT_EQ(tiny_error(tiny_with("\"recursions\": 4", "\"recursions\": 0")),
            "exitsim.json: depth.block: expected 0 when recursions is 0, found 1");
  const std::string plain = tiny_with("\"block\": 1, \"recursions\": 4", "\"block\": 0");
  EXPECT_EQ(tiny_error(std::string(plain).replace(plain.find("\"routers\": false"), 16,
                                                  "\"routers\": true")),
            "exitsim.json: routers: expected false for a model without recursions, found true");
}

// The simulator prices mixtures of experts (a preset such as mixtral-8x7b); the engine runs dense
// MLPs only, so a mixture's shape is refused rather than built with one MLP a layer.
TEST(ModelConfig, MixtureOfExpertsShapesAreRefusedNamingTheExperts) {
  ModelConfig config;
  config.config_file = "m/exitsim.json";
  config.shape.name = "moe";
  config.shape.d_model = 64;
  config.shape.n_heads = 4;
  config.shape.n_kv_heads = 2;
  config.shape.head_dim = 16;
  config.shape.ffn_dim = 128;
  config.shape.vocab = 300;
  config.shape.depth = DepthStructure::plain(2);
  config.shape.experts = 8;
  config.shape.experts_per_token = 2;
  EXPECT_EQ(error_of([&] { validate_model_config(config); }),
            "m/exitsim.json: experts: expected 0 (the engine runs dense MLPs; mixtures of "
            "experts are simulated only), found 8");
  config.shape.experts = 0;
  config.shape.experts_per_token = 0;
  EXPECT_EQ(error_of([&] { validate_model_config(config); }), "<no InputError>");
}

TEST(ModelConfig, MalformedJson) {
  EXPECT_EQ(tiny_error("[1]"), "exitsim.json: expected a JSON object, found the array [1]");
  EXPECT_EQ(tiny_error(tiny_with("\"name\": \"tiny-recursive\"", "\"vocab\": 300")),
            "exitsim.json: expected each key once per object, found the key \"vocab\" twice");
  EXPECT_EQ(tiny_error("{\"format\": "),
            "exitsim.json: expected valid JSON, found parse error at line 1, column 12: syntax "
            "error while parsing value - unexpected end of input; expected '[', '{', or a "
            "literal");
}

TEST(ModelConfig, HuggingFaceLlamaLoadsAsAPlainModel) {
  const ModelConfig c = parse_hf_llama_config(k_llama, "config.json", "models/llama");
  EXPECT_EQ(c.format, ModelFormat::hf_llama);
  EXPECT_EQ(c.shape.name, "llama");
  EXPECT_EQ(c.shape.d_model, 64);
  EXPECT_EQ(c.shape.head_dim, 16);  // hidden_size / num_attention_heads
  EXPECT_EQ(c.shape.depth, DepthStructure::plain(4));
  EXPECT_EQ(c.shape.depth.effective_exit_points(), (std::vector<int>{4}));
  EXPECT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.tokenizer, TokenizerKind::ids);
  EXPECT_FALSE(c.routers);

  const ModelConfig mha = parse_hf_llama_config(
      llama_with("\"num_key_value_heads\": 2,", "\"head_dim\": null,"), "config.json", "x");
  EXPECT_EQ(mha.shape.n_kv_heads, 4);
  EXPECT_EQ(mha.shape.head_dim, 16);
}

TEST(ModelConfig, HuggingFaceFeaturesWeDoNotRunAreRefused) {
  EXPECT_EQ(llama_error(llama_with("\"rope_scaling\": null",
                                   "\"rope_scaling\": {\"rope_type\": \"yarn\"}")),
            "config.json: rope_scaling.rope_type: expected \"llama3\" or \"default\" (or a null "
            "rope_scaling), "
            "found the string \"yarn\"");
  // transformers v5's rope_parameters holds rope_theta and the scaling: read as an unknown key,
  // it left theta at 10000 and the scaling off.
  EXPECT_EQ(llama_error(llama_with("\"rope_scaling\": null",
                                   "\"rope_parameters\": {\"rope_theta\": 500000.0}")),
            "config.json: rope_parameters: expected none (write rope_theta and rope_scaling at "
            "the top level, as transformers 4 does), found the object {\"rope_theta\":500000.0}");
  EXPECT_EQ(llama_error(llama_with("\"attention_bias\": false", "\"attention_bias\": true")),
            "config.json: attention_bias: expected false (biases are not supported), found true");
  EXPECT_EQ(llama_error(llama_with("\"attention_bias\": false", "\"mlp_bias\": true")),
            "config.json: mlp_bias: expected false (biases are not supported), found true");
  EXPECT_EQ(llama_error(llama_with("\"silu\"", "\"gelu\"")),
            "config.json: hidden_act: expected \"silu\" (SwiGLU), found \"gelu\"");
  EXPECT_EQ(llama_error(R"({"model_type": "mistral"})"),
            "config.json: model_type: expected \"llama\" (or architectures containing "
            "\"LlamaForCausalLM\"), found the string \"mistral\"");
  // Shape problems name the Hugging Face key.
  EXPECT_EQ(llama_error(llama_with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3")),
            "config.json: num_key_value_heads: expected a divisor of n_heads (4), found 3");
  EXPECT_EQ(llama_error(llama_with("\"hidden_size\": 64", "\"hidden_size\": 66")),
            "config.json: head_dim: expected a value, as hidden_size (66) is not a multiple of "
            "num_attention_heads (4), found none");
}

// Llama 3.1 8B's config.json as published (less its token ids).
const char* const k_llama31 = R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* const k_llama3_scaling =
    R"("rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"})";

// k_llama31 with its rope_scaling object replaced by `scaling`.
std::string llama31_with_scaling(const std::string& scaling) {
  std::string text = k_llama31;
  const std::size_t at = text.find(k_llama3_scaling);
  EXPECT_NE(at, std::string::npos);
  return text.replace(at, std::string(k_llama3_scaling).size(),
                      "\"rope_scaling\": {" + scaling + "}");
}

const RopeScaling k_llama31_scaling{.kind = RopeScalingKind::llama3,
                                    .factor = 8.0,
                                    .low_freq_factor = 1.0,
                                    .high_freq_factor = 4.0,
                                    .original_max_position_embeddings = 8192};

TEST(ModelConfig, HuggingFaceLlama31LoadsWithItsRopeScaling) {
  const ModelConfig c = parse_hf_llama_config(k_llama31, "config.json", "models/llama-3.1-8b");
  EXPECT_EQ(c.rope_scaling, k_llama31_scaling);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.max_positions, 131072);
  EXPECT_EQ(c.shape.head_dim, 128);
  EXPECT_EQ(c.shape.n_kv_heads, 8);
  // Older transformers spell the type key "type"; some configs carry both spellings.
  const std::string numbers =
      R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192)";
  for (const std::string& type : {std::string(R"("type": "llama3")"),
                                  std::string(R"("type": "llama3", "rope_type": "llama3")")}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(parse_hf_llama_config(llama31_with_scaling(numbers + ", " + type), "config.json", "x")
                  .rope_scaling,
              k_llama31_scaling);
  }
  // Llama 3.2's factor 32, as a whole-number JSON value.
  EXPECT_EQ(parse_hf_llama_config(llama31_with_scaling(
                                      R"("factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
                                         "original_max_position_embeddings": 8192,
                                         "rope_type": "llama3")"),
                                  "config.json", "x")
                .rope_scaling.factor,
            32.0);
  // And from a model directory, as the CLI loads it.
  const std::filesystem::path dir = model_dir("llama31");
  write(dir / "config.json", k_llama31);
  EXPECT_EQ(load_model_config(dir).rope_scaling, k_llama31_scaling);
  // Without rope_scaling (or with null) there is no scaling.
  EXPECT_EQ(parse_hf_llama_config(k_llama, "config.json", "x").rope_scaling, RopeScaling{});
}

// transformers writes {"rope_type": "default"} for plain rotary embeddings: no scaling, as null.
TEST(ModelConfig, HuggingFaceDefaultRopeTypeIsNoScaling) {
  const ModelConfig plain =
      parse_hf_llama_config(llama31_with_scaling(R"("rope_type": "default")"), "config.json", "x");
  EXPECT_EQ(plain.rope_scaling.kind, RopeScalingKind::none);
  EXPECT_EQ(llama_error(llama31_with_scaling(R"("rope_type": "default", "factor": 8.0)")),
            "config.json: rope_scaling.factor: unknown key \"factor\"; expected one of rope_type, "
            "type");
}

TEST(ModelConfig, HuggingFaceRopeScalingErrorsAreOneLineAndNameTheField) {
  const std::string numbers = R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192)";
  // Every other scaling transformers knows changes the frequencies (or the attention) in its own
  // way, and is refused naming the key that says which; so is any other spelling.
  for (const char* type : {"linear", "dynamic", "yarn", "longrope", "su", "Llama3"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(llama_error(llama31_with_scaling(numbers + ", \"rope_type\": \"" + type + "\"")),
              std::string("config.json: rope_scaling.rope_type: expected \"llama3\" or "
                          "\"default\" (or a null rope_scaling), found the string \"") +
                  type + "\"");
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("type": "linear", "factor": 8.0)",
       "config.json: rope_scaling.type: expected \"llama3\" or \"default\" (or a null "
       "rope_scaling), found the "
       "string \"linear\""},
      {numbers,
       "config.json: rope_scaling.rope_type: expected \"llama3\" or \"default\" (or a null "
       "rope_scaling), found "
       "none"},
      {numbers + R"(, "rope_type": 3)",
       "config.json: rope_scaling.rope_type: expected \"llama3\" or \"default\" (or a null "
       "rope_scaling), found "
       "the number 3"},
      {numbers + R"(, "rope_type": "llama3", "type": "linear")",
       "config.json: rope_scaling.type: expected the same as rope_type (\"llama3\"), found the "
       "string \"linear\""},
      {numbers + R"(, "rope_type": "llama3", "beta_fast": 32)",
       "config.json: rope_scaling.beta_fast: unknown key \"beta_fast\"; expected one of "
       "rope_type, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, "
       "type"},
      {R"("rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.factor: expected a positive number, found none"},
      {R"("rope_type": "llama3", "factor": "8", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.factor: expected a positive number, found the string \"8\""},
      {R"("rope_type": "llama3", "factor": -8, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.factor: expected a positive number, found the number -8"},
      {R"("rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.factor: expected a number >= 1 (it divides the low "
       "frequencies), found 0.5"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.low_freq_factor: expected a positive number, found the number "
       "0"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": null,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.high_freq_factor: expected a positive number, found none"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.high_freq_factor: expected a number above low_freq_factor (4), "
       "found 4"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 0.5,
          "original_max_position_embeddings": 8192)",
       "config.json: rope_scaling.high_freq_factor: expected a number above low_freq_factor (1), "
       "found 0.5"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 0)",
       "config.json: rope_scaling.original_max_position_embeddings: expected an integer in [1, "
       "16777216], found the number 0"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192.5)",
       "config.json: rope_scaling.original_max_position_embeddings: expected an integer in [1, "
       "16777216], found the number 8192.5"},
      {R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0)",
       "config.json: rope_scaling.original_max_position_embeddings: expected an integer in [1, "
       "16777216], found none"},
  };
  for (const auto& [scaling, message] : cases) {
    SCOPED_TRACE(scaling);
    const std::string error = llama_error(llama31_with_scaling(scaling));
    EXPECT_EQ(error, message);
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
  EXPECT_EQ(llama_error(llama_with("\"rope_scaling\": null", "\"rope_scaling\": \"llama3\"")),
            "config.json: rope_scaling: expected an object, found the string \"llama3\"");
}

TEST(ModelConfig, ExitsimJsonRoundTripsRopeScaling) {
  const std::string scaled =
      tiny_with("\"max_positions\": 4096",
                R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
         "max_positions": 4096)");
  const ModelConfig c = parse_exitsim_config(scaled, "exitsim.json", "models/tiny");
  RopeScaling want = k_llama31_scaling;
  want.original_max_position_embeddings = 1024;
  EXPECT_EQ(c.rope_scaling, want);
  const std::string text = model_config_json(c);
  EXPECT_NE(text.find(R"("rope_scaling": {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 1024
  },)"),
            std::string::npos)
      << text;
  EXPECT_EQ(parse_exitsim_config(text, "exitsim.json", "models/tiny"), c);
  // Written only when there is one.
  const ModelConfig plain = parse_exitsim_config(k_tiny, "exitsim.json", "models/tiny");
  EXPECT_EQ(plain.rope_scaling, RopeScaling{});
  EXPECT_EQ(model_config_json(plain).find("rope_scaling"), std::string::npos);

  // Our own format is strict: one spelling of the type key, no null, the same checks.
  const auto scaled_with = [&](const std::string& from, const std::string& to) {
    std::string text_with = scaled;
    return text_with.replace(text_with.find(from), from.size(), to);
  };
  EXPECT_EQ(tiny_error(scaled_with("\"rope_type\"", "\"type\"")),
            "exitsim.json: rope_scaling.rope_type: expected \"llama3\" (or no rope_scaling), found "
            "none");
  EXPECT_EQ(tiny_error(scaled_with("\"llama3\"", "\"yarn\"")),
            "exitsim.json: rope_scaling.rope_type: expected \"llama3\" (or no rope_scaling), found "
            "the string \"yarn\"");
  EXPECT_EQ(tiny_error(scaled_with("\"factor\"", "\"factr\"")),
            "exitsim.json: rope_scaling.factr: unknown key \"factr\"; did you mean \"factor\"?");
  EXPECT_EQ(tiny_error(scaled_with("\"factor\": 8.0", "\"factor\": 0.25")),
            "exitsim.json: rope_scaling.factor: expected a number >= 1 (it divides the low "
            "frequencies), found 0.25");
  EXPECT_EQ(tiny_error(tiny_with("\"max_positions\": 4096",
                                 "\"rope_scaling\": null, \"max_positions\": 4096")),
            "exitsim.json: rope_scaling: expected an object, found null");
}

TEST(ModelConfig, LoadPrefersExitsimJsonAndAppliesExitLayers) {
  const std::filesystem::path both = model_dir("both");
  write(both / "exitsim.json", k_tiny);
  write(both / "config.json", k_llama);
  const ModelConfig ours = load_model_config(both);
  EXPECT_EQ(ours.format, ModelFormat::exitsim);
  EXPECT_EQ(ours.config_file, (both / "exitsim.json").string());
  EXPECT_EQ(ours.dir, both);

  const std::filesystem::path llama = model_dir("llama");
  write(llama / "config.json", k_llama);
  const ModelConfig plain = load_model_config(llama, {2, 4});
  EXPECT_EQ(plain.format, ModelFormat::hf_llama);
  EXPECT_EQ(plain.shape.depth.exit_points, (std::vector<int>{2, 4}));
  EXPECT_EQ(plain.weights, "model.safetensors");
  const std::string config = (llama / "config.json").string();
  EXPECT_EQ(error_of([&] {
              load_model_config(llama, {3, 8});
            }),
            config + ": depth.exit_points: expected exit points in [1, 4], found 8");
  EXPECT_EQ(error_of([&] {
              load_model_config(llama, {3, 2});
            }),
            config + ": depth.exit_points: expected exit points ascending past 3, found 2");

  write(llama / "model.safetensors.index.json", "{}");
  EXPECT_EQ(load_model_config(llama).weights, "model.safetensors.index.json");
}

TEST(ModelConfig, LoadFromADirectoryWithoutAConfig) {
  const std::filesystem::path empty = model_dir("empty");
  EXPECT_EQ(error_of([&] { load_model_config(empty); }),
            empty.string() +
                ": expected a model directory with exitsim.json or config.json, "
                "found neither");
  const std::filesystem::path nowhere = empty / "nowhere";
  EXPECT_EQ(error_of([&] { load_model_config(nowhere); }),
            nowhere.string() +
                ": expected a model directory with exitsim.json or config.json, "
                "found no such directory");
}

}  // namespace
}  // namespace exitsim::engine
