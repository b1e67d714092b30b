#pragma once

// What a tokenizer.json says, in the form encoding needs: ids of the byte symbols, merges keyed
// by the pair of ids they join, the added tokens, and the pre-tokenizer as a list of steps.

#include <unicode/uversion.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exitsim/text/added_token_trie.hpp"

// ICU's namespace is versioned (icu_72) with `icu` an alias, so declarations go through its macros.
U_NAMESPACE_BEGIN
class RegexPattern;
class Normalizer2;
U_NAMESPACE_END

namespace exitsim::text {

struct MergeRule {
  std::int32_t rank = 0;    // the merge's index in model.merges: lower merges first
  std::int32_t merged = 0;  // the id of the joined token
};

// One pre-tokenizer step, applied to every piece the steps before it made.
struct PreTokenizerStep {
  // Splits each piece on the pattern's matches, keeping both the matches and the text between
  // them as pieces (Hugging Face's "Isolated" behaviour). Null for a step that does not split.
  std::shared_ptr<const icu::RegexPattern> pattern;
  // ByteLevel's add_prefix_space: a piece not starting with a space gets one.
  bool add_prefix_space = false;
};

struct BpeModel {
  std::string file;  // for messages
  std::unordered_map<std::string, std::int32_t> token_ids;
  std::vector<std::string> tokens;                      // by id; empty where no token has the id
  std::vector<bool> is_added;                           // by id: decodes to its content verbatim
  std::array<std::int32_t, 256> byte_ids{};             // the id of each byte's one-symbol token
  std::unordered_map<std::uint64_t, MergeRule> merges;  // key: pair_key(left, right)
  AddedTokenTrie added;  // text splits at the leftmost, longest added token
  std::vector<PreTokenizerStep> pre_tokenizer;
  const icu::Normalizer2* nfc = nullptr;  // set for an NFC normalizer; ICU owns it
  // The post-processor's single-sequence template: ids around the text's own (Llama 3's
  // <|begin_of_text|> before it).
  std::vector<std::int32_t> template_before;
  std::vector<std::int32_t> template_after;
  bool ignore_merges = false;  // a piece that is a whole vocabulary token stays one
};

inline std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
         std::uint64_t{static_cast<std::uint32_t>(right)};
}

}  // namespace exitsim::text
