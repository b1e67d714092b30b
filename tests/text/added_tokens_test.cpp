// Added tokens: the trie that finds them (against a brute-force reference on random, overlapping
// tokens), its cost on the 5,000-token reproducer (N12), and their ids held near the file's own
// token count (N4).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exitsim/text/added_token_trie.hpp"
#include "exitsim/text/bpe_tokenizer.hpp"
#include "support/byte_level_vocab.hpp"
#include "support/test_files.hpp"

namespace exitsim::text {
namespace {

using nlohmann::json;
using test_support::error_of;
using test_support::TempDir;
using Ids = std::vector<std::int32_t>;

struct Added {
  std::string content;
  std::int32_t id;
};

// The reference: every token compared at the position, the longest kept, the first of equals
// (what the tokenizer did before the trie: tokens sorted longest first, stably, first match).
std::optional<AddedTokenTrie::Match> brute_force_at(const std::vector<Added>& tokens,
                                                    std::string_view text, std::size_t at) {
  std::optional<AddedTokenTrie::Match> best;
  for (const Added& token : tokens) {
    if (text.compare(at, token.content.size(), token.content) == 0 &&
        (!best || token.content.size() > best->length))
      best = AddedTokenTrie::Match{token.id, token.content.size()};
  }
  return best;
}

std::string random_text(std::mt19937& random, std::string_view alphabet, std::size_t length) {
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string text;
  for (std::size_t i = 0; i < length; ++i)
    text += alphabet[pick(random)];
  return text;
}

// Tokens over a 4-letter alphabet, 1 to 5 bytes: many are prefixes of others, many overlap,
// some repeat with another id.
std::vector<Added> random_tokens(std::mt19937& random, int count, std::int32_t first_id) {
  std::uniform_int_distribution<std::size_t> length(1, 5);
  std::vector<Added> tokens;
  for (int i = 0; i < count; ++i)
    tokens.push_back(Added{random_text(random, "<|a>", length(random)), first_id + i});
  return tokens;
}

TEST(AddedTokenTrie, FindsTheLongestTokenAtEveryPositionAsTheBruteForceDoes) {
  std::mt19937 random(41);
  for (int round = 0; round < 200; ++round) {
    const std::vector<Added> tokens = random_tokens(random, 1 + round % 30, 1000);
    AddedTokenTrie trie;
    for (const Added& token : tokens)
      trie.add(token.content, token.id);
    const std::string text = random_text(random, "<|a>b", 200);
    for (std::size_t at = 0; at < text.size(); ++at) {
      const auto expected = brute_force_at(tokens, text, at);
      const auto found = trie.longest_at(text, at);
      ASSERT_EQ(found.has_value(), expected.has_value()) << "round " << round << " at " << at;
      if (found) {
        EXPECT_EQ(found->id, expected->id) << "round " << round << " at " << at;
        EXPECT_EQ(found->length, expected->length) << "round " << round << " at " << at;
      }
    }
  }
}

// A byte-level tokenizer with a few merges over the alphabet and `added` as its added tokens.
json tokenizer_with(const std::vector<Added>& added) {
  json tokenizer = json::parse(test_support::byte_level_tokenizer_json({"< |", "a >", "<| a>"}));
  tokenizer["added_tokens"] = json::array();
  for (const Added& token : added)
    tokenizer["added_tokens"].push_back({{"id", token.id}, {"content", token.content}});
  return tokenizer;
}

// The text split at the leftmost, longest added token (the brute force above), the rest encoded
// by a tokenizer without added tokens.
Ids reference_encode(const std::vector<Added>& tokens, const BpeTokenizer& plain,
                     std::string_view text) {
  Ids ids;
  std::size_t plain_start = 0;
  std::size_t at = 0;
  const auto flush = [&](std::size_t end) {
    const Ids part = plain.encode(text.substr(plain_start, end - plain_start));
    ids.insert(ids.end(), part.begin(), part.end());
  };
  while (at < text.size()) {
    const auto match = brute_force_at(tokens, text, at);
    if (!match) {
      ++at;
      continue;
    }
    flush(at);
    ids.push_back(match->id);
    at += match->length;
    plain_start = at;
  }
  flush(text.size());
  return ids;
}

TEST(AddedTokenTrie, EncodingMatchesTheBruteForceSplitOnRandomTexts) {
  std::mt19937 random(7);
  const BpeTokenizer plain = BpeTokenizer::from_json_text(tokenizer_with({}).dump(), "plain");
  for (int round = 0; round < 100; ++round) {
    const std::vector<Added> tokens = random_tokens(random, 1 + round % 20, 300);
    const BpeTokenizer tokenizer =
        BpeTokenizer::from_json_text(tokenizer_with(tokens).dump(), "added");
    const std::string text = random_text(random, "<|a> b", 300);
    EXPECT_EQ(tokenizer.encode(text), reference_encode(tokens, plain, text)) << text;
  }
}

// N12's reproducer: 5,000 added tokens <|r0|>..<|r4999|> and a 2 MB message of "<|" repeated.
// Compared one by one, each of the 2,000,000 positions tried all 5,000 tokens (18-32 s); the
// trie's walk from a position visits at most one node per byte of the longest token, and here
// stops after "<|" and the next "<" (no token continues "<|<").
std::vector<Added> reproducer_tokens() {
  std::vector<Added> tokens;
  for (int i = 0; i < 5000; ++i)
    tokens.push_back(Added{fmt::format("<|r{}|>", i), 2000 + i});
  return tokens;
}

TEST(AddedTokenTrie, TheFiveThousandTokenReproducerVisitsTwoNodesPerPosition) {
  AddedTokenTrie trie;
  for (const Added& token : reproducer_tokens())
    trie.add(token.content, token.id);
  std::string text;
  for (int i = 0; i < 1000000; ++i)
    text += "<|";
  std::size_t visited = 0;
  std::size_t walks = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (!trie.starts_with(static_cast<unsigned char>(text[at])))
      continue;
    ++walks;
    EXPECT_FALSE(trie.longest_at(text, at, &visited));
  }
  EXPECT_EQ(walks, 1000000U);
  EXPECT_EQ(visited, 2000000U);  // "<" then "|" from each "<"; the brute force: 5e9 comparisons
}

TEST(AddedTokenTrie, TheFiveThousandTokenReproducerEncodes) {
  const BpeTokenizer tokenizer =
      BpeTokenizer::from_json_text(tokenizer_with(reproducer_tokens()).dump(), "tok5000.json");
  std::string text;
  for (int i = 0; i < 1000000; ++i)
    text += "<|";
  // "<|" is merged to one token (rank 0); pre-tokenized, the run of punctuation is one piece.
  const Ids ids = tokenizer.encode(text + "<|r4999|>");
  ASSERT_EQ(ids.size(), 1000001U);
  EXPECT_EQ(ids.back(), 6999);
  EXPECT_EQ(ids.front(), 256);
}

std::string tokenizer_error(const json& tokenizer) {
  TempDir dir;
  const std::string path = dir.write("tok.json", tokenizer.dump());
  const std::string error = error_of([&] { (void)BpeTokenizer::from_file(path); });
  return error.substr(path.size());
}

// N4: an id of 300,000,000 in a 4 kB file sized a 9.2 GB table; 2^31 - 2 (then the documented
// maximum) was `internal error: std::bad_alloc`. 259 vocab entries, "zz" and 2 added tokens:
// ids up to 262 + 65,536 - 1.
TEST(AddedTokenTrie, IdsFarBeyondTheFilesTokenCountAreRefused) {
  json tokenizer = tokenizer_with({{"<|a|>", 300}, {"<|b|>", 301}});
  tokenizer["model"]["vocab"]["zz"] = 300000000;
  EXPECT_EQ(tokenizer_error(tokenizer),
            ": model.vocab.\"zz\": expected a token id in [0, 65797] (the file's 262 vocab entries "
            "and added tokens, plus 65536), found 300000000");
  tokenizer["model"]["vocab"].erase("zz");
  tokenizer["added_tokens"][1]["id"] = 2147483646;
  EXPECT_EQ(tokenizer_error(tokenizer),
            ": added_tokens[1].id: expected a token id in [0, 65796] (the file's 261 vocab entries "
            "and added tokens, plus 65536), found 2147483646");
  tokenizer["added_tokens"][1]["id"] = 65796;
  const BpeTokenizer read = BpeTokenizer::from_json_text(tokenizer.dump(), "tok.json");
  EXPECT_EQ(read.id_limit(), 65797);
  EXPECT_EQ(read.encode("<|b|>"), (Ids{65796}));
}

// N1 through tokenizer.json: the 33rd level is refused while parsing.
TEST(AddedTokenTrie, DeeplyNestedTokenizerJsonIsRefused) {
  TempDir dir;
  const std::string path =
      dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(error_of([&] { (void)BpeTokenizer::from_file(path); }),
            path + ": expected at most 32 levels of nesting, found deeper nesting at byte 33");
}

}  // namespace
}  // namespace exitsim::text
