#include <fmt/format.h>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "exitsim/text/bpe_tokenizer.hpp"

namespace exitsim::engine {

std::vector<std::int32_t> encode_model_text(const ModelConfig& config, std::string_view text) {
  switch (config.tokenizer) {
    case TokenizerKind::bytes:
      return ByteTokenizer{}.encode(text);
    case TokenizerKind::bpe: {
      const std::string file = config.tokenizer_path().string();
      const text::BpeTokenizer tokenizer = text::BpeTokenizer::from_file(config.tokenizer_path());
      // Checked before encoding: an id past the embedding table would index out of it.
      if (tokenizer.id_limit() > config.shape.vocab) {
        throw InputError(
            SourceLocation{file, 0, 0, ""},
            expected_found(fmt::format("token ids below the model's vocab_size {} ({})",
                                       config.shape.vocab, config.config_file),
                           fmt::format("ids up to {}", tokenizer.id_limit() - 1)));
      }
      return tokenizer.encode(text);
    }
    case TokenizerKind::ids:
      break;
  }
  throw InputError({config.config_file, 0, 0, "tokenizer"},
                   "this model's tokenizer is not run here: give --token-ids instead of --text");
}

}  // namespace exitsim::engine
