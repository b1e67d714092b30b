// Which tokenizer a model directory's --text prompts go through: a Hugging Face Llama directory
// with a tokenizer.json encodes with its BPE; one without takes token ids only.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "support/test_files.hpp"

namespace exitsim::engine {
namespace {

using test_support::error_of;
using test_support::TempDir;

std::string llama_config(int vocab_size) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "num_hidden_layers": 2, "rms_norm_eps": 1e-6, "vocab_size": )" +
         std::to_string(vocab_size) + "}";
}

// Byte symbols at ids 0-255 in byte order (GPT-2's alphabet: printable Latin-1 bytes stand for
// themselves, the rest take U+0100.. in order) and one merge, "h i" -> "hi" = 256.
std::string tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  unsigned stand_in = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const unsigned code_point = printable ? b : stand_in++;
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04X", code_point);
    vocab[nlohmann::json::parse(std::string("\"") + escaped + "\"").get<std::string>()] = b;
  }
  vocab["hi"] = 256;
  return nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h i"}}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}
      .dump();
}

TEST(ModelText, LlamaDirectoryWithTokenizerJsonEncodesWithItsBpe) {
  TempDir dir;
  dir.write("config.json", llama_config(300));
  dir.write("tokenizer.json", tokenizer_json());
  const ModelConfig config = load_model_config(dir.dir());
  EXPECT_EQ(config.tokenizer, TokenizerKind::bpe);
  // "hi hi": pieces "hi", " hi" -> [hi] and [Ġ, h, i] -> "h i" merges -> Ġ hi.
  EXPECT_EQ(encode_model_text(config, "hi hi"), (std::vector<std::int32_t>{256, 32, 256}));
}

TEST(ModelText, LlamaDirectoryWithoutTokenizerJsonRefusesText) {
  TempDir dir;
  const std::string config_file = dir.write("config.json", llama_config(300));
  const ModelConfig config = load_model_config(dir.dir());
  EXPECT_EQ(config.tokenizer, TokenizerKind::ids);
  EXPECT_EQ(error_of([&] { (void)encode_model_text(config, "hi"); }),
            config_file +
                ": tokenizer: this model's tokenizer is not run here: give --token-ids instead of "
                "--text");
}

TEST(ModelText, TokenizerWithIdsPastTheModelsVocabularyIsRefused) {
  TempDir dir;
  const std::string config_file = dir.write("config.json", llama_config(256));
  const std::string tokenizer_file = dir.write("tokenizer.json", tokenizer_json());
  const ModelConfig config = load_model_config(dir.dir());
  EXPECT_EQ(error_of([&] { (void)encode_model_text(config, "hi"); }),
            tokenizer_file + ": expected token ids below the model's vocab_size 256 (" +
                config_file + "), found ids up to 256");
}

TEST(ModelText, ByteModelsKeepOneTokenPerByte) {
  ModelConfig config;
  config.tokenizer = TokenizerKind::bytes;
  EXPECT_EQ(encode_model_text(config, "hi"), (std::vector<std::int32_t>{'h', 'i'}));
}

}  // namespace
}  // namespace exitsim::engine
