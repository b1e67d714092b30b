#include "exitsim/engine/model_weights.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/safetensors.hpp"
#include "exitsim/traces/atomic_output.hpp"

namespace exitsim::engine {
namespace {

// A recursive model with every optional part: LoRA on one recursion, routers, an untied head.
ModelConfig small_config() {
  ModelConfig c;
  c.shape.name = "small";
  c.shape.d_model = 16;
  c.shape.n_heads = 4;
  c.shape.n_kv_heads = 2;
  c.shape.head_dim = 4;
  c.shape.ffn_dim = 24;
  c.shape.vocab = 260;
  c.shape.dtype = DType::fp32;
  c.shape.tied_embeddings = false;
  c.shape.depth.prelude_layers = 1;
  c.shape.depth.block_layers = 2;
  c.shape.depth.recursions = 2;
  c.shape.depth.lora_rank = {3, 0};
  c.shape.depth.coda_layers = 1;
  c.routers = true;
  validate_model_config(c);
  return c;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("exitsim_weights_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

// Every tensor of both models, by name, as flat values.
std::map<std::string, std::vector<float>> flatten(const ModelConfig& config,
                                                  const ModelWeights& w) {
  const std::filesystem::path dir = fresh_dir("flatten");
  save_model(dir, config, w, DType::fp32);
  SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  std::map<std::string, std::vector<float>> out;
  for (const std::string& name : file.names())
    out[name] = file.read_floats(name);
  return out;
}

TEST(ModelWeights, TensorSpecsFollowTheDepthStructure) {
  const std::vector<TensorSpec> specs = model_tensor_specs(small_config());
  // Embedding, 4 unique layers x 9, LoRA on one recursion: 2 block layers x 7 linears x A and B,
  // 2 routers x (weight, bias), final norm, head.
  EXPECT_EQ(specs.size(), 1u + 36u + 28u + 4u + 2u);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(specs[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<std::int64_t>{16, 16}));
  EXPECT_EQ(specs[3].shape, (std::vector<std::int64_t>{8, 16}));  // k: n_kv_heads x head_dim
  EXPECT_EQ(specs[37].name, "model.recursions.0.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(specs[37].shape, (std::vector<std::int64_t>{3, 16}));
  EXPECT_EQ(specs[50].name, "model.recursions.0.layers.0.mlp.down_proj.lora_B.weight");
  EXPECT_EQ(specs[50].shape, (std::vector<std::int64_t>{16, 3}));
  EXPECT_EQ(specs[65].name, "model.routers.0.weight");
  EXPECT_EQ(specs[65].shape, (std::vector<std::int64_t>{1, 16}));
  EXPECT_EQ(specs[66].shape, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(specs.back().name, "lm_head.weight");
}

TEST(ModelWeights, RandomWeightsAreDeterministicAndComplete) {
  const ModelConfig config = small_config();
  const ModelWeights a = random_model_weights(config, 7);
  check_weights_shape(config, a);
  ASSERT_EQ(a.lora.size(), 2u);
  EXPECT_EQ(a.lora[0].layers.size(), 2u);
  EXPECT_GT(a.lora[0].layers[1][6].b.cwiseAbs().maxCoeff(), 0.0f);  // adapters matter
  EXPECT_EQ(a.lora[1].layers[0][0].a.size(), 0);                    // rank 0: none
  EXPECT_EQ(a.routers.size(), 2u);
  EXPECT_EQ(a.layers[2].attn_norm, Eigen::VectorXf::Ones(16));
  EXPECT_EQ(a.routers[1].bias, 0.0f);
  // Roughly the intended scale: std 0.02 over 260 x 16 draws.
  const double stddev = std::sqrt(a.embedding.cwiseAbs2().mean());
  EXPECT_NEAR(stddev, 0.02, 0.002);

  EXPECT_EQ(flatten(config, a), flatten(config, random_model_weights(config, 7)));
  const ModelWeights other = random_model_weights(config, 8);
  EXPECT_NE(a.embedding, other.embedding);
  EXPECT_NE(a.layers[3].w_down, other.layers[3].w_down);
  // Streams are per tensor, so tensors of one model differ from each other.
  EXPECT_NE(a.layers[1].wq, a.layers[2].wq);
}

TEST(ModelWeights, TiedEmbeddingsShareTheHead) {
  ModelConfig config = small_config();
  config.shape.tied_embeddings = true;
  const ModelWeights w = random_model_weights(config, 1);
  EXPECT_EQ(w.lm_head, w.embedding);
  const std::vector<TensorSpec> specs = model_tensor_specs(config);
  EXPECT_EQ(specs.back().name, "model.norm.weight");

  const std::filesystem::path dir = fresh_dir("tied");
  save_model(dir, config, w, DType::fp32);
  const ModelWeights loaded = load_model_weights(load_model_config(dir));
  EXPECT_EQ(loaded.lm_head, w.embedding);
}

TEST(ModelWeights, SaveAndLoadRoundTripExactlyInF32) {
  const ModelConfig config = small_config();
  const ModelWeights w = random_model_weights(config, 42);
  const std::filesystem::path dir = fresh_dir("roundtrip");
  save_model(dir, config, w, DType::fp32);
  EXPECT_FALSE(std::filesystem::exists(
      traces::detail::AtomicOutputFile::temp_path_for((dir / "model.safetensors").string())));

  const ModelConfig loaded_config = load_model_config(dir);
  EXPECT_EQ(loaded_config.shape, config.shape);
  EXPECT_EQ(loaded_config.routers, true);
  EXPECT_EQ(loaded_config.dir, dir);
  const ModelWeights loaded = load_model_weights(loaded_config);
  EXPECT_EQ(loaded.embedding, w.embedding);
  EXPECT_EQ(loaded.layers[3].w_gate, w.layers[3].w_gate);
  EXPECT_EQ(loaded.lora[0].layers[1][2].a, w.lora[0].layers[1][2].a);
  EXPECT_EQ(loaded.routers[1].weight, w.routers[1].weight);
  EXPECT_EQ(loaded.lm_head, w.lm_head);
  EXPECT_EQ(flatten(loaded_config, loaded), flatten(config, w));
}

TEST(ModelWeights, SavingInHalfPrecisionRoundsEachValue) {
  const ModelConfig config = small_config();
  const ModelWeights w = random_model_weights(config, 3);
  for (const DType dtype : {DType::fp16, DType::bf16}) {
    const std::filesystem::path dir = fresh_dir("half");
    save_model(dir, config, w, dtype);
    const ModelWeights loaded = load_model_weights(load_model_config(dir));
    const float original = w.layers[0].wv(5, 7);
    const float expected = dtype == DType::fp16 ? f16_to_float(float_to_f16(original))
                                                : bf16_to_float(float_to_bf16(original));
    EXPECT_EQ(loaded.layers[0].wv(5, 7), expected);
    EXPECT_NEAR(loaded.lm_head(100, 3), w.lm_head(100, 3), 1e-3);
  }
}

TEST(ModelWeights, SaveRejectsWeightsOfAnotherShape) {
  const ModelConfig config = small_config();
  ModelWeights w = random_model_weights(config, 3);
  w.layers[1].wk.resize(4, 4);
  EXPECT_THROW(save_model(fresh_dir("wrong"), config, w, DType::fp32), std::invalid_argument);
  w.layers.pop_back();
  EXPECT_THROW(check_weights_shape(config, w), std::invalid_argument);
}

// Writes a Hugging Face style Llama checkpoint by hand: names are spelled out here rather than
// taken from model_tensor_specs, so the test pins the mapping.
struct LlamaFiles {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> values;

  void add(std::string name, std::vector<std::int64_t> shape) {
    std::int64_t count = 1;
    for (std::int64_t dim : shape)
      count *= dim;
    std::vector<float> v(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(names.size()) + static_cast<float>(i % 64) / 64.0f;
    names.push_back(std::move(name));
    shapes.push_back(std::move(shape));
    values.push_back(std::move(v));
  }
  void write(const std::filesystem::path& path, std::size_t from, std::size_t to,
             DType dtype) const {
    std::vector<TensorToWrite> tensors;
    for (std::size_t i = from; i < to; ++i)
      tensors.push_back({names[i], dtype, shapes[i], values[i]});
    write_safetensors(path, tensors, {{"format", "pt"}});
  }
};

const char* const k_llama_config = R"({"architectures": ["LlamaForCausalLM"],
  "model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
  "intermediate_size": 12, "num_hidden_layers": 2, "vocab_size": 10, "rms_norm_eps": 1e-5,
  "tie_word_embeddings": false})";

LlamaFiles llama_files() {
  LlamaFiles f;
  f.add("model.embed_tokens.weight", {10, 8});
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    f.add(p + "input_layernorm.weight", {8});
    f.add(p + "self_attn.q_proj.weight", {8, 8});
    f.add(p + "self_attn.k_proj.weight", {4, 8});
    f.add(p + "self_attn.v_proj.weight", {4, 8});
    f.add(p + "self_attn.o_proj.weight", {8, 8});
    f.add(p + "self_attn.rotary_emb.inv_freq", {2});
    f.add(p + "post_attention_layernorm.weight", {8});
    f.add(p + "mlp.gate_proj.weight", {12, 8});
    f.add(p + "mlp.up_proj.weight", {12, 8});
    f.add(p + "mlp.down_proj.weight", {8, 12});
  }
  f.add("model.norm.weight", {8});
  f.add("lm_head.weight", {10, 8});
  return f;
}

std::filesystem::path llama_dir(const std::string& name) {
  const std::filesystem::path dir = fresh_dir(name);
  std::ofstream(dir / "config.json") << k_llama_config;
  return dir;
}

TEST(ModelWeights, HuggingFaceLlamaLoadsAsAPlainModel) {
  const std::filesystem::path dir = llama_dir("llama");
  const LlamaFiles files = llama_files();
  files.write(dir / "model.safetensors", 0, files.names.size(), DType::bf16);
  const ModelConfig config = load_model_config(dir, {1, 2});
  EXPECT_EQ(config.shape.depth.effective_exit_points(), (std::vector<int>{1, 2}));
  const ModelWeights w = load_model_weights(config);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_TRUE(w.lora.empty());
  EXPECT_TRUE(w.routers.empty());
  // Tensor i holds i + (flat index % 64) / 64, rounded to bf16 in the file.
  const auto stored = [](float value) { return bf16_to_float(float_to_bf16(value)); };
  EXPECT_EQ(files.names[11], "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(w.layers[1].attn_norm(3), stored(11.0f + 3.0f / 64.0f));
  EXPECT_EQ(files.names[13], "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(w.layers[1].wk(1, 2), stored(13.0f + 10.0f / 64.0f));  // row-major [out, in]
  EXPECT_EQ(w.lm_head(9, 7), stored(22.0f + 15.0f / 64.0f));       // 79 % 64 = 15
}

TEST(ModelWeights, TiedLlamaIgnoresAStoredHead) {
  const std::filesystem::path dir = fresh_dir("tied_llama");
  std::string config = k_llama_config;
  config.replace(config.find("false"), 5, "true");
  std::ofstream(dir / "config.json") << config;
  const LlamaFiles files = llama_files();
  files.write(dir / "model.safetensors", 0, files.names.size(), DType::fp32);
  const ModelWeights w = load_model_weights(load_model_config(dir));
  EXPECT_EQ(w.lm_head, w.embedding);
}

TEST(ModelWeights, ShardedHuggingFaceCheckpoint) {
  const std::filesystem::path dir = llama_dir("sharded");
  const LlamaFiles files = llama_files();
  files.write(dir / "model-00001-of-00002.safetensors", 0, 11, DType::fp32);
  files.write(dir / "model-00002-of-00002.safetensors", 11, files.names.size(), DType::fp16);
  std::string index = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  for (std::size_t i = 0; i < files.names.size(); ++i) {
    index += (i == 0 ? "" : ", ") + ("\"" + files.names[i] + "\": \"model-0000") +
             (i < 11 ? "1" : "2") + "-of-00002.safetensors\"";
  }
  std::ofstream(dir / "model.safetensors.index.json") << index + "}}";
  const ModelConfig config = load_model_config(dir);
  EXPECT_EQ(config.weights, "model.safetensors.index.json");
  const ModelWeights w = load_model_weights(config);
  EXPECT_EQ(w.layers[0].w_down(7, 11), 10.0f + 31.0f / 64.0f);
  EXPECT_EQ(w.final_norm(0), 21.0f);
}

TEST(ModelWeights, ShardIndexMustNameFilesBesideIt) {
  const std::filesystem::path dir = llama_dir("escape");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}})";
  const std::string index = (dir / "model.safetensors.index.json").string();
  EXPECT_EQ(error_of([&] { load_model_weights(load_model_config(dir)); }),
            index +
                ": weight_map.model.norm.weight: expected a file name in the index's "
                "directory, found \"../elsewhere.safetensors\"");
}

TEST(ModelWeights, MissingMisshapenUnexpectedAndNonFloatTensors) {
  const std::filesystem::path dir = llama_dir("broken");
  const std::string path = (dir / "model.safetensors").string();
  LlamaFiles files = llama_files();
  const auto load = [&] { load_model_weights(load_model_config(dir)); };

  files.write(path, 0, files.names.size() - 1, DType::fp32);
  EXPECT_EQ(error_of(load),
            path + ": lm_head.weight: expected a tensor of shape [10, 8], found none");

  files.shapes.back() = {8, 10};
  files.write(path, 0, files.names.size(), DType::fp32);
  EXPECT_EQ(error_of(load), path + ": lm_head.weight: expected shape [10, 8], found [8, 10]");

  files.shapes.back() = {10, 8};
  files.add("model.layers.2.mlp.up_proj.weight", {12, 8});
  files.write(path, 0, files.names.size(), DType::fp32);
  EXPECT_EQ(error_of(load), path +
                                ": model.layers.2.mlp.up_proj.weight: expected no such tensor (" +
                                (dir / "config.json").string() +
                                " describes 2 unique layers, no LoRA, no routers), found a F32 "
                                "tensor of shape [12, 8]");
}

TEST(ModelWeights, NonFloatTensorIsNamed) {
  const std::filesystem::path dir = llama_dir("int8");
  const std::string path = (dir / "model.safetensors").string();
  const LlamaFiles files = llama_files();
  files.write(path, 0, files.names.size(), DType::fp32);
  // Rewrite the final norm's dtype in place: F32 of 8 elements becomes I32 of 8 (same bytes).
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::size_t at = bytes.find("\"dtype\":\"F32\"", bytes.find("\"model.norm.weight\""));
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 9, 3, "I32");
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(error_of([&] { load_model_weights(load_model_config(dir)); }),
            path + ": model.norm.weight: expected dtype F32, F16 or BF16, found I32");
}

}  // namespace
}  // namespace exitsim::engine
