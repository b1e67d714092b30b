// Byte-level BPE against a small tokenizer.json written here. The vocabulary gives every byte's
// symbol the byte's own value as id (so 'h' is 104, 0xC3 is 195), and the merged tokens the ids
// from 256 up; every expected id list below is worked out by hand from the merge ranks.

#include "exitsim/text/bpe_tokenizer.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_files.hpp"

namespace exitsim::text {
namespace {

using nlohmann::json;
using test_support::error_of;
using test_support::TempDir;
using Ids = std::vector<std::int32_t>;

// GPT-2's byte alphabet, written out independently of the library: the printable Latin-1 bytes
// stand for themselves, the other 68 take U+0100.. in byte order.
std::string byte_symbol_for_test(unsigned b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  unsigned code_point = b;
  if (!printable) {
    unsigned stand_ins_before = 0;
    for (unsigned earlier = 0; earlier < b; ++earlier) {
      if (!((earlier >= 0x21 && earlier <= 0x7E) || (earlier >= 0xA1 && earlier <= 0xAC) ||
            earlier >= 0xAE))
        ++stand_ins_before;
    }
    code_point = 0x100 + stand_ins_before;
  }
  return json::parse("\"\\u" + fmt::format("{:04X}", code_point) + "\"").get<std::string>();
}

// Merges in rank order, the merged token's id = 256 + rank.
//   0 "l l"    -> "ll"     256        6 "Ġw or"   -> "Ġwor"   262
//   1 "h e"    -> "he"     257        7 "Ġwor l"  -> "Ġworl"  263
//   2 "he ll"  -> "hell"   258        8 "Ġworl d" -> "Ġworld" 264
//   3 "hell o" -> "hello"  259        9 "e l"     -> "el"     265
//   4 "Ġ w"    -> "Ġw"     260       10 "Ã ©"     -> "Ã©"(é)  266
//   5 "o r"    -> "or"     261       11 "Ġ Ġ"     -> "ĠĠ"     267
//                                    12 "Ġ b"     -> "Ġb"     268
const std::vector<std::pair<std::string, std::string>> k_merges = {
    {"l", "l"},          {"h", "e"}, {"he", "ll"},         {"hell", "o"},
    {"\u0120", "w"},     {"o", "r"}, {"\u0120w", "or"},    {"\u0120wor", "l"},
    {"\u0120worl", "d"}, {"e", "l"}, {"\u00C3", "\u00A9"}, {"\u0120", "\u0120"},
    {"\u0120", "b"},
};

json gpt2_style_tokenizer(bool pair_form_merges = false) {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b)
    vocab[byte_symbol_for_test(b)] = b;
  json merges = json::array();
  for (std::size_t rank = 0; rank < k_merges.size(); ++rank) {
    const auto& [left, right] = k_merges[rank];
    vocab[left + right] = 256 + rank;
    if (pair_form_merges)
      merges.push_back(json::array({left, right}));
    else
      merges.push_back(left + " " + right);
  }
  vocab["xyz"] = 300;  // reachable by no merge: only ignore_merges finds it
  json tokenizer;
  tokenizer["version"] = "1.0";
  tokenizer["normalizer"] = nullptr;
  tokenizer["pre_tokenizer"] = {{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", true},
                                {"use_regex", true}};
  tokenizer["added_tokens"] =
      json::array({{{"id", 1000}, {"content", "<|endoftext|>"}, {"special", true}},
                   {{"id", 1001}, {"content", "<|end|>"}, {"special", true}}});
  tokenizer["model"] = {
      {"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merges}};
  return tokenizer;
}

BpeTokenizer load(const json& tokenizer) {
  TempDir dir;
  return BpeTokenizer::from_file(dir.write("tokenizer.json", tokenizer.dump()));
}

TEST(BpeTokenizer, MergesWordsInRankOrderAndSplitsBeforeTheSpace) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // GPT-2's pattern splits "hello world" into "hello" and " world" (" ?\p{L}+").
  // "hello": h e l l o -> "l l"(0) -> h e ll o -> "h e"(1) -> he ll o -> "he ll"(2) -> hell o
  //   -> "hell o"(3) -> hello = 259.
  // " world": Ġ w o r l d -> "Ġ w"(4) -> "o r"(5) -> Ġw or l d -> "Ġw or"(6) -> "Ġwor l"(7)
  //   -> "Ġworl d"(8) -> Ġworld = 264.
  EXPECT_EQ(tokenizer.encode("hello world"), (Ids{259, 264}));
}

TEST(BpeTokenizer, StringAndPairFormMergesEncodeAlike) {
  const BpeTokenizer strings = load(gpt2_style_tokenizer(false));
  const BpeTokenizer pairs = load(gpt2_style_tokenizer(true));
  EXPECT_EQ(pairs.encode("hello world"), (Ids{259, 264}));
  EXPECT_EQ(pairs.encode("hello world"), strings.encode("hello world"));
}

TEST(BpeTokenizer, LowerRankedMergeAppliesFirstWhereverItIs) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // "hel": pairs (h,e) rank 1 and (e,l) rank 9: "h e" wins although "e l" would also apply.
  EXPECT_EQ(tokenizer.encode("hel"), (Ids{257, 108}));
  // "ell": (e,l) rank 9 and (l,l) rank 0: the right-hand pair merges first, leaving e + ll.
  EXPECT_EQ(tokenizer.encode("ell"), (Ids{101, 256}));
  // "lll": (l,l) twice at the same rank: the leftmost merges, leaving ll + l.
  EXPECT_EQ(tokenizer.encode("lll"), (Ids{256, 108}));
}

TEST(BpeTokenizer, LongRunsMergeLeftToRightWithoutQuadraticTime) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // 200 001 'l's are one piece: "l l" (rank 0) pairs them from the left, 100 000 times, and no
  // merge joins two "ll". A quadratic merge loop would take some 10^10 steps here.
  Ids expected(100'000, 256);
  expected.push_back(108);
  EXPECT_EQ(tokenizer.encode(std::string(200'001, 'l')), expected);
}

TEST(BpeTokenizer, SplitsAMillionsLongRunOfSpaces) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // "a", 3 999 999 spaces, " b": "\s+(?!\S)" backtracks over the whole run (past ICU's default
  // match stack) to leave the last space to " b". The run's spaces pair from the left by "Ġ Ġ"
  // (rank 11): 1 999 999 ĠĠ and one Ġ; then Ġb (268).
  Ids expected{97};
  expected.insert(expected.end(), 1'999'999, 267);
  expected.push_back(32);
  expected.push_back(268);
  EXPECT_EQ(tokenizer.encode("a" + std::string(4'000'000, ' ') + "b"), expected);
}

// The textbook loop over strings: find the lowest-ranked adjacent pair (leftmost of equals),
// join it, repeat. Written independently of the library's heap-based merging.
Ids reference_merge(const std::string& word) {
  std::vector<std::string> symbols;
  for (const char c : word)
    symbols.emplace_back(1, c);
  while (symbols.size() > 1) {
    std::size_t best = symbols.size();
    std::size_t best_rank = k_merges.size();
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      for (std::size_t rank = 0; rank < best_rank; ++rank) {
        if (k_merges[rank].first == symbols[i] && k_merges[rank].second == symbols[i + 1]) {
          best = i;
          best_rank = rank;
        }
      }
    }
    if (best == symbols.size())
      break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  Ids ids;
  for (const std::string& symbol : symbols) {
    if (symbol.size() == 1) {
      ids.push_back(static_cast<unsigned char>(symbol[0]));
      continue;
    }
    for (std::size_t rank = 0; rank < k_merges.size(); ++rank) {
      if (k_merges[rank].first + k_merges[rank].second == symbol)
        ids.push_back(static_cast<std::int32_t>(256 + rank));
    }
  }
  return ids;
}

TEST(BpeTokenizer, MergesLikeTheTextbookLoopOnRandomWords) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // Letters only, so GPT-2's pattern leaves each word one piece; these letters make most merges
  // of the fixture reachable ("hell", "el", "or" ...).
  const std::string letters = "hellowrd";
  std::uint64_t state = 12345;
  for (std::size_t trial = 0; trial < 2000; ++trial) {
    std::string word;
    const std::size_t length = 1 + trial % 12;
    for (std::size_t i = 0; i < length; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      word.push_back(letters[(state >> 33) % letters.size()]);
    }
    ASSERT_EQ(tokenizer.encode(word), reference_merge(word)) << word;
  }
}

TEST(BpeTokenizer, MultiByteUtf8AndEmojiEncodeByteByByteAndRoundTrip) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // "héllo" is one piece (\p{L}+); bytes h C3 A9 l l o = symbols h Ã © l l o. (l,l) rank 0,
  // then (Ã,©) rank 10 -> h é ll o; no merge joins h+é, é+ll or ll+o.
  EXPECT_EQ(tokenizer.encode("h\u00E9llo"), (Ids{104, 266, 256, 111}));
  // U+1F600 is F0 9F 98 80, no merge among them: the byte values.
  const std::string emoji = "\U0001F600";
  EXPECT_EQ(tokenizer.encode(emoji), (Ids{0xF0, 0x9F, 0x98, 0x80}));
  for (const std::string& text :
       {std::string("h\u00E9llo w\u00F6rld \U0001F600!"), std::string("\u65E5\u672C\u8A9E 123"),
        std::string("tab\there\r\nnew  lines\n\n"), std::string("\xFF\xFE not UTF-8 \xC3")}) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text) << text;
  }
}

TEST(BpeTokenizer, WhitespaceSplitsKeepRunsOfSpacesApartFromTheNextWord) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // "a  b": GPT-2's "\s+(?!\S)" takes the first space only (the second is followed by 'b'),
  // and " ?\p{L}+" takes " b": pieces "a", " ", " b". "Ġ Ġ" (rank 11) would join the two
  // spaces, but they are in different pieces; " b" becomes Ġb (rank 12).
  EXPECT_EQ(tokenizer.encode("a  b"), (Ids{97, 32, 268}));
  // "a   " : trailing spaces are one piece "   " -> Ġ Ġ Ġ -> "Ġ Ġ"(11) leftmost -> ĠĠ Ġ.
  EXPECT_EQ(tokenizer.encode("a   "), (Ids{97, 267, 32}));
  EXPECT_EQ(tokenizer.encode(""), Ids{});
}

TEST(BpeTokenizer, AddedTokensMatchLongestFirstAndDecodeVerbatim) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  // "<|endoftext|>" and its prefix-sharing "<|end|>": each where it stands, never a merge
  // across it ("hel" + "lo" would be hello unsplit).
  EXPECT_EQ(tokenizer.encode("hel<|endoftext|>lo<|end|>"), (Ids{257, 108, 1000, 108, 111, 1001}));
  EXPECT_EQ(tokenizer.decode(Ids{259, 1000, 264}), "hello<|endoftext|> world");
  EXPECT_EQ(tokenizer.token_id("<|endoftext|>"), 1000);
  EXPECT_EQ(tokenizer.token_id("hello"), 259);
  EXPECT_EQ(tokenizer.token_id("nope"), std::nullopt);
  EXPECT_EQ(tokenizer.id_limit(), 1002);
}

TEST(BpeTokenizer, UnknownIdsDecodeToNothingAndNegativeOnesThrow) {
  const BpeTokenizer tokenizer = load(gpt2_style_tokenizer());
  EXPECT_EQ(tokenizer.decode(Ids{104, 500, 5000, 105}), "hi");
  EXPECT_THROW(tokenizer.decode(Ids{-1}), std::invalid_argument);
}

TEST(BpeTokenizer, IgnoreMergesTakesAWholePieceFoundInTheVocabulary) {
  json config = gpt2_style_tokenizer();
  EXPECT_EQ(load(config).encode("xyz"), (Ids{120, 121, 122}));
  config["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(config).encode("xyz"), (Ids{300}));
}

TEST(BpeTokenizer, AddPrefixSpaceGivesTheFirstWordASpace) {
  json config = gpt2_style_tokenizer();
  config["pre_tokenizer"]["add_prefix_space"] = true;
  // " world" -> Ġworld (264), as in the middle of a sentence.
  EXPECT_EQ(load(config).encode("world"), (Ids{264}));
}

TEST(BpeTokenizer, NfcNormalizerComposesBeforeMerging) {
  json config = gpt2_style_tokenizer();
  config["normalizer"] = {{"type", "NFC"}};
  // e + U+0301 composes to é (C3 A9) -> "Ã ©" (rank 10) -> 266.
  EXPECT_EQ(load(config).encode("e\u0301"), (Ids{266}));
  // Without the normalizer: 'e', then U+0301 = CC 81 as two byte tokens.
  EXPECT_EQ(load(gpt2_style_tokenizer()).encode("e\u0301"), (Ids{101, 0xCC, 0x81}));
}

// Llama 3's post-processor: a Sequence of ByteLevel and a template putting <|begin_of_text|>
// (here id 1002, an added token) before the text.
json with_bos_template(json config) {
  config["added_tokens"].push_back(
      {{"id", 1002}, {"content", "<|begin_of_text|>"}, {"special", true}});
  config["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [1002]}}}]})");
  return config;
}

TEST(BpeTokenizer, TemplateAddsTheBosTokenOnlyWhenAskedFor) {
  const BpeTokenizer tokenizer = load(with_bos_template(gpt2_style_tokenizer()));
  EXPECT_EQ(tokenizer.encode("hello"), (Ids{259}));
  EXPECT_EQ(tokenizer.encode_with_template("hello"), (Ids{1002, 259}));
  EXPECT_EQ(tokenizer.encode_with_template(""), (Ids{1002}));
  // Without a post-processor the template is empty.
  EXPECT_EQ(load(gpt2_style_tokenizer()).encode_with_template("hello"), (Ids{259}));
}

TEST(BpeTokenizer, TemplateTokensAfterTheTextComeAfterIt) {
  json config = gpt2_style_tokenizer();
  // No special_tokens map: the name is looked up as a token.
  config["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"Sequence", {{"id", "A"}}}},
                              {{"SpecialToken", {{"id", "<|endoftext|>"}}}}})}};
  EXPECT_EQ(load(config).encode_with_template("hi"), (Ids{104, 105, 1000}));
}

// Llama 3's layout: a Split with its own pattern, then ByteLevel without a regex.
TEST(BpeTokenizer, Llama3SplitKeepsDigitsInThreesAndContractionsApart) {
  json config = gpt2_style_tokenizer();
  const std::string llama3_pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  config["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Split"},
                                      {"pattern", {{"Regex", llama3_pattern}}},
                                      {"behavior", "Isolated"},
                                      {"invert", false}},
                                     {{"type", "ByteLevel"},
                                      {"add_prefix_space", false},
                                      {"trim_offsets", true},
                                      {"use_regex", false}}})}};
  // Merges "3 4" (rank 13, id 269), "1 2" (14, 270), "12 3" (15, 271).
  for (const auto& [left, right] :
       std::vector<std::pair<std::string, std::string>>{{"3", "4"}, {"1", "2"}, {"12", "3"}}) {
    config["model"]["vocab"][left + right] = 256 + config["model"]["merges"].size();
    config["model"]["merges"].push_back(left + " " + right);
  }
  const BpeTokenizer tokenizer = load(config);
  // "12345" -> pieces "123", "45" (\p{N}{1,3}). "123": (1,2) rank 14 -> 12 3 -> (12,3) rank 15
  // -> 271. "45": no merge. Unsplit, "3 4" (rank 13) would have joined first.
  EXPECT_EQ(tokenizer.encode("12345"), (Ids{271, 52, 53}));
  // "HE'LL": "(?i:'ll)" matches "'LL" case-insensitively: pieces "HE", "'LL" -> bytes.
  EXPECT_EQ(tokenizer.encode("HE'LL"), (Ids{72, 69, 39, 76, 76}));
  // Under GPT-2's ByteLevel regex " ?\p{N}+" keeps "12345" whole: 1 2 3 4 5 -> "3 4"(13)
  // -> 1 2 34 5 -> "1 2"(14) -> 12 34 5 ("12 3" no longer applies: 3 is gone).
  json gpt2 = config;
  gpt2["pre_tokenizer"] = gpt2_style_tokenizer()["pre_tokenizer"];
  EXPECT_EQ(load(gpt2).encode("12345"), (Ids{270, 269, 53}));
}

TEST(BpeTokenizer, ASplitPatternThatBacktracksWithoutEndIsRefused) {
  json config = gpt2_style_tokenizer();
  config["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"Regex", "(a+)+b"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}};
  TempDir dir;
  const std::string path = dir.write("tokenizer.json", config.dump());
  const BpeTokenizer tokenizer = BpeTokenizer::from_file(path);
  EXPECT_EQ(tokenizer.encode("aab"), (Ids{97, 97, 98}));
  // 40 'a's and no 'b': 2^40 ways to fail.
  EXPECT_EQ(error_of([&] { (void)tokenizer.encode(std::string(40, 'a')); }),
            path +
                ": pre_tokenizer: expected a split pattern ICU can match on the text, found ICU "
                "error U_REGEX_TIME_OUT");
}

// Every bad tokenizer.json fails with one line naming the file and the key.
struct BadTokenizer {
  const char* name;
  std::function<void(json&)> spoil;
  const char* key_and_message;
};

class BpeTokenizerBadInput : public ::testing::TestWithParam<BadTokenizer> {};

TEST_P(BpeTokenizerBadInput, FailsWithOneLineNamingFileAndKey) {
  json config = gpt2_style_tokenizer();
  GetParam().spoil(config);
  TempDir dir;
  const std::string path = dir.write("tokenizer.json", config.dump());
  const std::string error = error_of([&] { (void)BpeTokenizer::from_file(path); });
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_TRUE(error.starts_with(path + ": ")) << error;
  EXPECT_NE(error.find(GetParam().key_and_message), std::string::npos) << error;
}

const BadTokenizer k_bad_tokenizers[] = {
    {"TopLevelArray", [](json& c) { c = json::array(); },
     "expected a tokenizer.json object, found []"},
    {"NoModel", [](json& c) { c.erase("model"); }, "model: expected an object, found none"},
    {"NotBpe", [](json& c) { c["model"]["type"] = "WordPiece"; },
     "model.type: expected \"BPE\" (the only model read here), found \"WordPiece\""},
    {"ByteFallback", [](json& c) { c["model"]["byte_fallback"] = true; },
     "model.byte_fallback: expected false"},
    {"WordSuffix", [](json& c) { c["model"]["end_of_word_suffix"] = "</w>"; },
     "model.end_of_word_suffix: expected null"},
    {"NoVocab", [](json& c) { c["model"].erase("vocab"); },
     "model.vocab: expected an object, found none"},
    {"VocabArray", [](json& c) { c["model"]["vocab"] = json::array(); },
     "model.vocab: expected an object, found []"},
    {"NegativeId", [](json& c) { c["model"]["vocab"]["xyz"] = -3; },
     "model.vocab.\"xyz\": expected a token id in [0, 65807] (the file's 272 vocab entries and "
     "added tokens, plus 65536), found -3"},
    {"StringId", [](json& c) { c["model"]["vocab"]["xyz"] = "7"; },
     "model.vocab.\"xyz\": expected a token id"},
    {"DuplicateId", [](json& c) { c["model"]["vocab"]["xyz"] = 259; },
     "expected an id no other token has, found 259"},
    {"MissingByteSymbol", [](json& c) { c["model"]["vocab"].erase("\u0120"); },
     "model.vocab: expected the byte-level symbol \"\u0120\" for byte 0x20"},
    {"NoMerges", [](json& c) { c["model"].erase("merges"); },
     "model.merges: expected an array of merges, found none"},
    {"MergesObject", [](json& c) { c["model"]["merges"] = json::object(); },
     "model.merges: expected an array of merges, found {}"},
    {"MergeWithoutSpace", [](json& c) { c["model"]["merges"][2] = "hell"; },
     "model.merges[2]: expected a merge: \"left right\" or [\"left\", \"right\"], found \"hell\""},
    {"MergeOfNumbers",
     [](json& c) {
       c["model"]["merges"][0] = json::array({1, 2});
     },
     "model.merges[0]: expected a merge"},
    {"MergeOfUnknownToken", [](json& c) { c["model"]["merges"][1] = "h q9"; },
     "model.merges[1]: expected tokens of model.vocab, found \"q9\", which is not in it"},
    {"MergeResultNotInVocab", [](json& c) { c["model"]["merges"][1] = "h o"; },
     "model.merges[1]: expected tokens of model.vocab, found \"ho\", which is not in it"},
    {"AddedTokensObject", [](json& c) { c["added_tokens"] = json::object(); },
     "added_tokens: expected an array"},
    {"AddedTokenWithoutId", [](json& c) { c["added_tokens"][1].erase("id"); },
     "added_tokens[1].id: expected a token id, found none"},
    {"AddedTokenEmpty", [](json& c) { c["added_tokens"][0]["content"] = ""; },
     "added_tokens[0].content: expected the token's text, found \"\""},
    {"UnknownPreTokenizer", [](json& c) { c["pre_tokenizer"]["type"] = "Whitespace"; },
     "pre_tokenizer.type: expected \"ByteLevel\", \"Split\" or \"Sequence\", found "
     "\"Whitespace\""},
    {"SplitRemoved",
     [](json& c) {
       c["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"Regex", "\\s+"}}},
                             {"behavior", "Removed"},
                             {"invert", false}};
     },
     "pre_tokenizer.behavior: expected \"Isolated\""},
    {"SplitBadRegex",
     [](json& c) {
       c["pre_tokenizer"] = {{"type", "Split"},
                             {"pattern", {{"Regex", "(\\p{L}"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}};
     },
     "pre_tokenizer.pattern.Regex: expected a regular expression, found \"(\\\\p{L}\" (U_REGEX_"},
    {"UnknownPostProcessor",
     [](json& c) {
       c["post_processor"] = {{"type", "BertProcessing"}};
     },
     "post_processor.type: expected \"ByteLevel\", \"TemplateProcessing\" or \"Sequence\", found "
     "\"BertProcessing\""},
    {"TemplateWithoutSequence",
     [](json& c) {
       c["post_processor"] = {{"type", "TemplateProcessing"},
                              {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}}}}})}};
     },
     "post_processor.single: expected one {\"Sequence\": ...} item for the text, found none"},
    {"TemplateNamingAnUnknownToken",
     [](json& c) {
       c["post_processor"] = {{"type", "TemplateProcessing"},
                              {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}},
                                                      {{"Sequence", {{"id", "A"}}}}})}};
     },
     "post_processor.single: expected special tokens the vocabulary has, found \"<s>\""},
    {"TemplateIdWithoutToken",
     [](json& c) {
       c = with_bos_template(c);
       c["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"][0] = 5000;
     },
     "post_processor.processors[1].special_tokens.\"<|begin_of_text|>\".ids[0]: expected the id of "
     "a vocabulary or added token, found 5000"},
    {"NfkcNormalizer",
     [](json& c) {
       c["normalizer"] = {{"type", "NFKC"}};
     },
     "normalizer: expected null or {\"type\": \"NFC\"}, found {\"type\":\"NFKC\"}"},
};

INSTANTIATE_TEST_SUITE_P(Matrix, BpeTokenizerBadInput, ::testing::ValuesIn(k_bad_tokenizers),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(BpeTokenizerBadFile, MissingFileDirectoryNonJsonAndHugeNumbersNameTheFile) {
  TempDir dir;
  const std::string missing = dir.path("absent.json");
  EXPECT_EQ(error_of([&] { (void)BpeTokenizer::from_file(missing); }),
            missing + ": cannot open the tokenizer file: No such file or directory");
  EXPECT_EQ(error_of([&] { (void)BpeTokenizer::from_file(dir.dir()); }),
            dir.dir().string() + ": cannot open the tokenizer file: Is a directory");
  const std::string not_json = dir.write("tokenizer.json", "{\"model\":\n  {\"type\": BPE}}");
  const std::string error = error_of([&] { (void)BpeTokenizer::from_file(not_json); });
  EXPECT_EQ(error, not_json + ": expected a tokenizer.json (JSON), found invalid JSON at byte 22");
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  const std::string huge = dir.write("huge.json", R"({"version": 1e400})");
  EXPECT_EQ(error_of([&] { (void)BpeTokenizer::from_file(huge); }),
            huge +
                ": expected JSON numbers within the range of a double, found number overflow "
                "parsing '1e400'");
}

}  // namespace
}  // namespace exitsim::text
