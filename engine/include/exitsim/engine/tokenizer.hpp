#pragma once

// Where the engine's token ids come from: raw text through the byte tokenizer (models with
// `tokenizer: bytes`) or the model directory's tokenizer.json (`tokenizer: bpe`), or token-id
// files for models whose own tokenizer is not run here (`tokenizer: ids`); and the prompts a
// request trace's requests get when it is replayed on the engine.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/engine/model_config.hpp"

namespace exitsim::engine {

// One token per byte: a byte's id is its value, 0-255. A model's vocabulary may be larger; the
// ids from 256 up are its special tokens (end of text, padding), which no text encodes to.
class ByteTokenizer {
 public:
  static constexpr std::int32_t k_byte_tokens = 256;

  std::vector<std::int32_t> encode(std::string_view text) const;
  // Special ids (>= 256) decode to nothing: they stand for no bytes, and dropping them keeps the
  // output exactly the bytes the text tokens spell. Throws std::invalid_argument for a negative
  // id, which no model produces.
  std::string decode(std::span<const std::int32_t> ids) const;
};

// `text` as the model's token ids: through the byte tokenizer (`tokenizer: bytes`) or the BPE of
// the model directory's tokenizer.json (`bpe`). Throws InputError naming the config file and key
// "tokenizer" for an `ids` model, whose tokenizer is not run here, and naming tokenizer.json when
// it is bad or its ids do not fit the model's vocabulary.
std::vector<std::int32_t> encode_model_text(const ModelConfig& config, std::string_view text);

// Reads a token-id file: one document per line, its ids as non-negative decimal integers
// separated by spaces or tabs ('\r' counts as a space, so CRLF files read alike). Blank lines and
// lines whose first non-blank character is '#' are skipped. Every id must be below `vocab`
// (>= 1). Throws InputError naming the file, line and column for a missing file, a field that is
// not an id or is out of range, or a file without documents.
std::vector<std::vector<std::int32_t>> read_token_id_file(const std::string& path,
                                                          std::int64_t vocab);

// The whole file as bytes. Throws InputError when it cannot be opened or read.
std::string read_text_file(const std::string& path);

// Prompts for replayed requests, cut from a corpus of token ids. A request's prompt is a pure
// function of (seed, request id, length): the same request gets the same prompt whatever else is
// asked for and in whatever order, so replays and their comparisons see the same inputs.
class PromptSource {
 public:
  // Throws InputError (field "workload") when `corpus` is empty.
  PromptSource(std::vector<std::int32_t> corpus, std::uint64_t seed);

  // `length` (>= 0) consecutive corpus tokens from an offset drawn from the request's own random
  // stream ("engine.prompt.<id>"). The offset is drawn so the prompt fits before the corpus ends;
  // only a corpus shorter than `length` wraps around to its start. Throws std::invalid_argument
  // for a negative length.
  std::vector<std::int32_t> prompt(RequestId id, std::int64_t length) const;

  std::size_t corpus_size() const { return corpus_.size(); }

 private:
  std::vector<std::int32_t> corpus_;
  std::uint64_t seed_ = 0;
};

}  // namespace exitsim::engine
