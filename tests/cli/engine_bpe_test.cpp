// `engine run --text` on a model whose tokenizer is a tokenizer.json (byte-level BPE), end to
// end through the binary: the random tiny model (vocab 260) told `tokenizer: bpe`.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/byte_level_vocab.hpp"
#include "support/cli_fixture.hpp"

namespace cli_support {
namespace {

class EngineBpe : public Cli {
 protected:
  // The random model, switched to the BPE tokenizer; returns the engine options.
  std::string bpe_model(const std::vector<std::string>& merges) {
    const std::string options = random_model_and_text("hello there, the world. ", 60);
    const fs::path config = dir_ / "model" / "exitsim.json";
    std::string text = slurp(config);
    const std::string bytes = "\"tokenizer\": \"bytes\"";
    const std::size_t at = text.find(bytes);
    EXPECT_NE(at, std::string::npos) << text;
    file("model/exitsim.json", text.replace(at, bytes.size(), "\"tokenizer\": \"bpe\""));
    file("model/tokenizer.json", exitsim::test_support::byte_level_tokenizer_json(merges));
    return options;
  }

  Result engine_run(const std::string& options) const {
    return run("engine run " + options +
               " --set engine.threads=1 --set workload.requests=2 --set "
               "'workload.input_tokens={dist: fixed, value: 8}' --set "
               "'workload.output_tokens={dist: fixed, value: 4}' --out '" +
               (dir_ / "out").string() + "'");
  }
};

TEST_F(EngineBpe, RunsPromptsThroughTheModelsTokenizerJson) {
  // Merged ids 256-259 fit the model's 260-token vocabulary.
  const Result r = engine_run(bpe_model({"h e", "l l", "\u0120 t", "\u0120t he"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 output tokens"), std::string::npos) << r.out;
}

TEST_F(EngineBpe, RefusesATokenizerWhoseIdsPassTheVocabulary) {
  // A fifth merge is id 260: past the embedding table.
  const Result r = engine_run(bpe_model({"h e", "l l", "\u0120 t", "\u0120t he", "o r"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json: expected token ids below the model's vocab_size 260"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(EngineBpe, WithoutTheTokenizerJsonNamesTheMissingFile) {
  const std::string options = bpe_model({});
  fs::remove(dir_ / "model" / "tokenizer.json");
  const Result r = engine_run(options);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json: cannot open the tokenizer file: No such file or directory"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace cli_support
