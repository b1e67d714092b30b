// Token sources: the byte tokenizer, token-id files, text files and replay prompts.

#include "exitsim/engine/tokenizer.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "support/test_files.hpp"

namespace exitsim::engine {
namespace {

using namespace std::string_literals;
using test_support::error_of;
using test_support::TempDir;

TEST(Tokenizer, BytesEveryByteIsItsOwnToken) {
  std::string text;
  for (int b = 0; b < 256; ++b)
    text.push_back(static_cast<char>(b));
  const ByteTokenizer tokenizer;
  const std::vector<std::int32_t> ids = tokenizer.encode(text);
  std::vector<std::int32_t> expected(256);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tokenizer.decode(ids), text);
  EXPECT_TRUE(tokenizer.encode("").empty());
  EXPECT_EQ(tokenizer.encode("h\xC3\xA9"), (std::vector<std::int32_t>{104, 195, 169}));
}

TEST(Tokenizer, BytesSpecialsDecodeToNothing) {
  const ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.decode(std::vector<std::int32_t>{256, 104, 105, 257, 33, 1000}), "hi!");
  EXPECT_THROW(tokenizer.decode(std::vector<std::int32_t>{104, -1}), std::invalid_argument);
}

TEST(TokenizerIdFile, ReadsDocumentsSkippingCommentsAndBlanks) {
  const TempDir dir;
  const std::string path = dir.write("good.txt",
                                     "\xEF\xBB\xBF# a comment\n"
                                     "1 2 3\n"
                                     "\n"
                                     "  \t\n"
                                     "\t4\t\t5 \r\n"
                                     "   # an indented comment\n"
                                     "0 999\r\n"
                                     "007");
  EXPECT_EQ(read_token_id_file(path, 1000),
            (std::vector<std::vector<std::int32_t>>{{1, 2, 3}, {4, 5}, {0, 999}, {7}}));
}

TEST(TokenizerIdFile, IdsAreInt32WhateverTheVocab) {
  const TempDir dir;
  const std::int64_t vocab = std::int64_t{1} << 40;
  const std::string largest = dir.write("largest.txt", "2147483647\n");
  EXPECT_EQ(read_token_id_file(largest, vocab),
            (std::vector<std::vector<std::int32_t>>{{2147483647}}));
  const std::string over = dir.write("over.txt", "2147483648\n");
  EXPECT_EQ(error_of([&] { read_token_id_file(over, vocab); }),
            over +
                ":1:1: token_id: expected a token id in [0, 2147483647] (vocab 1099511627776), "
                "found 2147483648");
  EXPECT_THROW(read_token_id_file(largest, 0), std::invalid_argument);
}

struct BadIds {
  const char* name;
  std::string content;
  const char* message;  // after "<path>:"
};

class TokenIdFileMalformed : public testing::TestWithParam<BadIds> {};

TEST_P(TokenIdFileMalformed, IsRejectedWithItsPosition) {
  const TempDir dir;
  const std::string path = dir.write("ids.txt", GetParam().content);
  EXPECT_EQ(error_of([&] { read_token_id_file(path, 1000); }), path + ":" + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizer, TokenIdFileMalformed,
    testing::Values(
        BadIds{"NotAnInteger", "1 2\n3 x4 5\n",
               "2:3: token_id: expected a token id (a non-negative integer), found \"x4\""},
        BadIds{"Fraction", "1.5\n",
               "1:1: token_id: expected a token id (a non-negative integer), found \"1.5\""},
        BadIds{"CommaSeparated", "1,2\n",
               "1:1: token_id: expected a token id (a non-negative integer), found \"1,2\""},
        BadIds{"PlusSign", "+1\n",
               "1:1: token_id: expected a token id (a non-negative integer), found \"+1\""},
        BadIds{"LoneMinus", "1 -\n",
               "1:3: token_id: expected a token id (a non-negative integer), found \"-\""},
        BadIds{"TrailingComment", "1 2 # ids\n",
               "1:5: token_id: expected a token id (a non-negative integer), found \"#\""},
        BadIds{"Negative", "# header\n\t-3\n",
               "2:2: token_id: expected a token id in [0, 999] (vocab 1000), found -3"},
        BadIds{"AtVocab", "999 1000\n",
               "1:5: token_id: expected a token id in [0, 999] (vocab 1000), found 1000"},
        BadIds{"Overflow", "1 99999999999999999999999\n",
               "1:3: token_id: expected a token id in [0, 999] (vocab 1000), found "
               "99999999999999999999999"},
        BadIds{"Empty", "",
               "1: document: expected at least one line of token ids, found end of file"},
        BadIds{"OnlyComments", "# one\n\n# two\n",
               "4: document: expected at least one line of token ids, found end of file"}),
    [](const testing::TestParamInfo<BadIds>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(TokenizerIdFile, MissingFileOrDirectoryIsAnInputError) {
  EXPECT_EQ(error_of([] { read_token_id_file("/nonexistent/ids.txt", 1000); }),
            "/nonexistent/ids.txt: cannot open the token-id file: No such file or directory");
  const TempDir dir;
  const std::string path = dir.dir().string();
  EXPECT_EQ(error_of([&] { read_token_id_file(path, 1000); }),
            path + ": cannot open the token-id file: Is a directory");
}

TEST(TokenizerTextFile, ReadsTheBytesAsTheyAre) {
  const std::string bytes = "line one\r\nzero \0 byte\n\xFF"s;
  ASSERT_EQ(bytes.size(), 23u);
  const TempDir dir;
  EXPECT_EQ(read_text_file(dir.write("text.bin", bytes)), bytes);
  EXPECT_EQ(read_text_file(dir.write("empty.txt", "")), "");
  EXPECT_EQ(error_of([] { read_text_file("/nonexistent/text.txt"); }),
            "/nonexistent/text.txt: cannot open the text file: No such file or directory");
  EXPECT_EQ(error_of([&] { read_text_file(dir.dir().string()); }),
            dir.dir().string() + ": cannot open the text file: Is a directory");
}

std::vector<std::int32_t> counting(std::int32_t n) {
  std::vector<std::int32_t> corpus(static_cast<std::size_t>(n));
  std::iota(corpus.begin(), corpus.end(), 0);
  return corpus;
}

TEST(PromptSource, CutsConsecutiveTokensThatFitTheCorpus) {
  const PromptSource source(counting(100), 42);
  EXPECT_EQ(source.corpus_size(), 100u);
  std::set<std::int32_t> starts;
  for (std::uint64_t id = 0; id < 200; ++id) {
    const std::vector<std::int32_t> prompt = source.prompt(RequestId{id}, 30);
    ASSERT_EQ(prompt.size(), 30u);
    EXPECT_LE(prompt.front(), 70);
    for (std::size_t i = 1; i < prompt.size(); ++i)
      EXPECT_EQ(prompt[i], prompt[i - 1] + 1);
    starts.insert(prompt.front());
  }
  // Every start in [0, 70] is possible; 200 requests reach most of them.
  EXPECT_GT(starts.size(), 50u);
  EXPECT_EQ(*starts.begin(), 0);
  EXPECT_EQ(*starts.rbegin(), 70);
  EXPECT_EQ(source.prompt(RequestId{3}, 100), counting(100));
  EXPECT_TRUE(source.prompt(RequestId{3}, 0).empty());
}

TEST(PromptSource, WrapsAroundAShortCorpus) {
  const PromptSource source(counting(7), 1);
  const std::vector<std::int32_t> prompt = source.prompt(RequestId{5}, 20);
  ASSERT_EQ(prompt.size(), 20u);
  for (std::size_t i = 1; i < prompt.size(); ++i)
    EXPECT_EQ(prompt[i], (prompt[i - 1] + 1) % 7);
  std::set<std::int32_t> starts;
  for (std::uint64_t id = 0; id < 100; ++id)
    starts.insert(source.prompt(RequestId{id}, 20).front());
  EXPECT_EQ(starts.size(), 7u);
}

TEST(PromptSource, IsAPureFunctionOfSeedRequestAndLength) {
  const PromptSource a(counting(1000), 7);
  const PromptSource b(counting(1000), 7);
  const std::vector<std::int32_t> first = a.prompt(RequestId{12}, 16);
  for (std::uint64_t id = 0; id < 50; ++id)
    b.prompt(RequestId{id}, 8);
  EXPECT_EQ(b.prompt(RequestId{12}, 16), first);
  EXPECT_EQ(a.prompt(RequestId{12}, 16), first);
  // Pinned: the draw comes from the stream "engine.prompt.12" of seed 7, shared with nothing else.
  EXPECT_EQ(first.front(), 780);

  const PromptSource other_seed(counting(1000), 8);
  int same = 0;
  for (std::uint64_t id = 0; id < 20; ++id)
    same += a.prompt(RequestId{id}, 16) == other_seed.prompt(RequestId{id}, 16) ? 1 : 0;
  EXPECT_LT(same, 3);
}

TEST(PromptSource, RejectsAnEmptyCorpusAndNegativeLengths) {
  EXPECT_EQ(error_of([] { PromptSource({}, 0); }),
            "workload: expected a prompt corpus of at least one token, found an empty one");
  EXPECT_THROW(PromptSource(counting(3), 0).prompt(RequestId{1}, -1), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::engine
