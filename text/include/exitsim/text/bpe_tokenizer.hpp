#pragma once

// Byte-level BPE (GPT-2, Llama 3, Qwen 2 and most current models) from a Hugging Face
// tokenizer.json: text is split on the added tokens, the rest normalized (none or NFC),
// pre-tokenized (ByteLevel / Split / Sequence), each piece's bytes mapped to GPT-2's printable
// byte alphabet and merged by the lowest-ranked merge until none applies. What is not read: the
// decoder (decoding is always byte-level) and the added tokens' lstrip/rstrip/single_word; the
// post-processor's template (BOS) is added by encode_with_template only.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::text {

struct BpeModel;

class BpeTokenizer {
 public:
  // Reads a tokenizer.json. Throws InputError naming the file and the key path ("model.merges[3]")
  // for a missing or unreadable file, malformed JSON, a model other than byte-level BPE, and any
  // key that is missing, mistyped, or names a token the vocabulary lacks.
  static BpeTokenizer from_file(const std::filesystem::path& path);
  // The same from tokenizer.json text; `file` names it in errors.
  static BpeTokenizer from_json_text(std::string_view json_text, const std::string& file);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Any bytes encode: invalid UTF-8 is split like U+FFFD but its bytes are kept as they are, so
  // decode(encode(text)) == text for every text whose normalization changes nothing.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // encode(text) inside the post-processor's single-sequence template (TemplateProcessing), as
  // Hugging Face's tokenizer(text).input_ids: Llama 3 puts <|begin_of_text|> first; GPT-2 has no
  // template and adds nothing.
  std::vector<std::int32_t> encode_with_template(std::string_view text) const;

  // Ids the tokenizer does not know (a model's padded vocabulary) decode to nothing. Throws
  // std::invalid_argument for a negative id, which no model produces.
  std::string decode(std::span<const std::int32_t> ids) const;

  // The id of a vocabulary or added token, e.g. "<|begin_of_text|>".
  std::optional<std::int32_t> token_id(std::string_view token) const;
  // One more than the largest id of any token: the smallest vocabulary a model needs.
  std::int64_t id_limit() const;

 private:
  explicit BpeTokenizer(std::unique_ptr<const BpeModel> model);
  std::unique_ptr<const BpeModel> model_;
};

}  // namespace exitsim::text
