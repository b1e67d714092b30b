// ShareGPT conversations as requests: the first human turn's tokens are the input, the reply
// after it the output, counted with a tokenizer.json written here.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "support/byte_level_vocab.hpp"
#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;

// Merges by rank: 0 "h i", 1 "Ġ t", 2 "h e", 3 "Ġt he", 4 "r e", 5 "Ġthe re". Token counts:
//   "hi"       -> hi                                                        = 1
//   "hi there" -> "hi" + " there": Ġ t h e r e -> Ġt(1) -> he(2) -> Ġthe(3) -> re(4)
//                 -> Ġthere(5)                                              = 2
//   "hello!"   -> "hello" (h e l l o -> he(2); l l o have no merge) + "!"   = 4 + 1 = 5
//   "hi hi"    -> "hi" + " hi" (Ġ h i -> Ġ hi)                              = 1 + 2 = 3
std::string write_tokenizer(const TempDir& dir) {
  return dir.write("tokenizer.json",
                   test_support::byte_level_tokenizer_json(
                       {"h i", "\u0120 t", "h e", "\u0120t he", "r e", "\u0120the re"}));
}

RequestTraceOptions with_tokenizer(const std::string& tokenizer) {
  RequestTraceOptions options;
  options.tokenizer = tokenizer;
  return options;
}

TEST(RequestShareGpt, FirstHumanTurnIsThePromptAndTheReplyAfterItTheOutput) {
  TempDir dir;
  const std::string path = dir.write("sharegpt.json", R"([
  {"id": "a", "conversations": [{"from": "human", "value": "hi there"},
                                {"from": "gpt", "value": "hello!"}]},
  {"id": "b", "conversations": [{"from": "system", "value": "be brief"},
                                {"from": "human", "value": "hi"},
                                {"from": "gpt", "value": "hi hi"},
                                {"from": "human", "value": "later turns"},
                                {"from": "gpt", "value": "are not replayed"}]},
  {"id": "c", "conversations": []},
  {"id": "d", "conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "hi"}]},
  {"id": "e", "conversations": [{"from": "human", "value": "hi"}, {"from": "human", "value": "hi"},
                                {"from": "gpt", "value": "hi"}]},
  {"id": "f", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": ""}]}
])");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::sharegpt);
  const auto result = read_all(path, with_tokenizer(write_tokenizer(dir)));
  EXPECT_EQ(result.format, "sharegpt");
  EXPECT_FALSE(result.has_arrivals);
  // c: no turns; d: no reply after its human turn; e: a human turn answered by a human turn;
  // f: an empty reply. All four skipped, as vLLM's benchmark skips them.
  EXPECT_EQ(result.skipped, 4);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 2, 5));
  EXPECT_EQ(result.requests[1], request(1, std::nullopt, 1, 3));
}

// A ShareGPT trace from a pipe (`trace inspect <(zcat sharegpt.json.gz)`): detection reads its
// head, the reader continues the same stream. Far longer than the head, it gives the requests the
// same file gives when opened by path.
TEST(RequestShareGpt, ReadsFromAFifoPastTheHeadAsFromTheFile) {
  TempDir dir;
  std::string conversations = "[";
  for (int i = 0; i < 3000; ++i) {
    conversations += std::string(i == 0 ? "" : ",") + R"({"id": ")" + std::to_string(i) +
                     R"(", "conversations": [)" + R"({"from": "human", "value": ")" +
                     (i % 2 == 0 ? "hi there" : "hi") + R"("}, {"from": "gpt", "value": ")" +
                     (i % 3 == 0 ? "hello!" : "hi hi") + R"("}]})";
  }
  conversations += "]";
  ASSERT_GT(conversations.size(), std::size_t{1} << 17);  // past the head detection reads
  const RequestTraceOptions options = with_tokenizer(write_tokenizer(dir));
  const auto from_file = read_all(dir.write("sharegpt.json", conversations), options);
  const std::string fifo = dir.path("sharegpt.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens the FIFO
    out << conversations;
  });
  const auto from_fifo = read_all(fifo, options);
  writer.join();
  EXPECT_EQ(from_fifo.format, "sharegpt");
  ASSERT_EQ(from_fifo.requests.size(), 3000U);
  ASSERT_EQ(from_file.requests.size(), 3000U);
  for (std::size_t i = 0; i < 3000; ++i) {
    EXPECT_EQ(from_fifo.requests[i].input_tokens, from_file.requests[i].input_tokens) << i;
    EXPECT_EQ(from_fifo.requests[i].output_tokens, from_file.requests[i].output_tokens) << i;
  }
  EXPECT_NE(from_fifo.requests[0].input_tokens, from_fifo.requests[1].input_tokens);
}

TEST(RequestShareGpt, PromptsCountTheTemplatesBosRepliesDoNot) {
  TempDir dir;
  // The fixture tokenizer with Llama 3's post-processor: <|begin_of_text|> (id 300) before the
  // text.
  nlohmann::json tokenizer = nlohmann::json::parse(test_support::byte_level_tokenizer_json(
      {"h i", "\u0120 t", "h e", "\u0120t he", "r e", "\u0120the re"}));
  tokenizer["added_tokens"] = {{{"id", 300}, {"content", "<|begin_of_text|>"}}};
  tokenizer["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|begin_of_text|>"}}, {"Sequence": {"id": "A"}}]})");
  const std::string path =
      dir.write("s.json", R"([{"conversations": [{"from": "human", "value": "hi there"},
                                       {"from": "gpt", "value": "hello!"}]},
                   {"conversations": [{"from": "human", "value": ""},
                                      {"from": "gpt", "value": "hello!"}]}])");
  const auto result = read_all(path, with_tokenizer(dir.write("tokenizer.json", tokenizer.dump())));
  // "hi there" is 2 tokens, 3 with the BOS; "hello!" stays 5. An empty prompt is still skipped,
  // though its template alone has a token.
  ASSERT_EQ(result.requests.size(), 1U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 3, 5));
  EXPECT_EQ(result.skipped, 1);
}

TEST(RequestShareGpt, DetectsAOneLineArrayLongerThanAnyCsvLine) {
  TempDir dir;
  // Past the line reader's 16 MiB: detection reads only the first bytes (after a BOM and blanks).
  std::string one_line = "\xEF\xBB\xBF \r\n [";
  const std::string conversation =
      R"({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hi"}]},)";
  while (one_line.size() <= (std::size_t{16} << 20))
    one_line += conversation;
  one_line.back() = ']';
  const std::string path = dir.write("s.json", one_line);
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::sharegpt);
}

TEST(RequestShareGpt, NotesNameTheSkippedConversations) {
  TempDir dir;
  const std::string path = dir.write("s.json", R"([{"conversations": []},
                    {"conversations": [{"from": "human", "value": "hi"},
                                       {"from": "gpt", "value": "hi"}]}])");
  auto source = open_request_trace(path, with_tokenizer(write_tokenizer(dir)));
  while (source->next()) {
  }
  EXPECT_EQ(source->notes(),
            std::vector<std::string>{"sharegpt: 1 of 2 conversations had no human turn with a "
                                     "non-empty reply after it and were skipped"});
}

TEST(RequestShareGpt, SkipBadRowsCountsMalformedConversations) {
  TempDir dir;
  const std::string path = dir.write("s.json", R"([{"conversations": 5},
                             {"conversations": [{"from": "human", "value": "hi there"},
                                                {"from": "gpt", "value": "hi"}]}])");
  RequestTraceOptions options = with_tokenizer(write_tokenizer(dir));
  options.skip_bad_rows = true;
  const auto result = read_all(path, options);
  EXPECT_EQ(result.skipped, 1);
  ASSERT_EQ(result.requests.size(), 1U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 2, 1));
}

TEST(RequestShareGpt, WithoutATokenizerNamesTheScenarioKey) {
  TempDir dir;
  const std::string path = dir.write("s.json", "[]");
  EXPECT_EQ(error_of(path), path +
                                ": workload.trace.tokenizer: expected a tokenizer.json to count "
                                "the ShareGPT turns' tokens with, found none");
}

// Each bad file fails with one line naming the file and, where there is one, the key path.
struct BadShareGpt {
  const char* name;
  std::function<std::string()> content;
  const char* message;  // what follows "<path>: "
};

class RequestShareGptBadInput : public ::testing::TestWithParam<BadShareGpt> {};

TEST_P(RequestShareGptBadInput, FailsWithOneLine) {
  TempDir dir;
  const std::string path = dir.write("s.json", GetParam().content());
  RequestTraceOptions options = with_tokenizer(write_tokenizer(dir));
  options.format = RequestTraceFormat::sharegpt;
  const std::string error = error_of(path, options);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_TRUE(error.starts_with(path + ": " + GetParam().message)) << error;
}

std::string conversation_with(const std::string& turns) {
  return R"([{"id": "x", "conversations": [)" + turns + "]}]";
}

const BadShareGpt k_bad_sharegpt[] = {
    {"NotJson", [] { return std::string("[{\"conversations\": [}"); },
     "expected a ShareGPT JSON array of conversations, found invalid JSON at byte 21"},
    {"Empty", [] { return std::string(); },
     "expected a ShareGPT JSON array of conversations, found invalid JSON at byte 1"},
    {"ObjectNotArray", [] { return std::string(R"({"conversations": []})"); },
     "expected a ShareGPT JSON array of conversations, found {\"conversations\":[]}"},
    {"ElementNotObject", [] { return std::string("[1]"); },
     "[0]: expected a conversation object with \"conversations\", found 1"},
    {"MissingConversations", [] { return std::string(R"([{"id": "x"}])"); },
     "[0].conversations: expected an array of turns, found none"},
    {"ConversationsNotArray", [] { return std::string(R"([{"conversations": "hi"}])"); },
     "[0].conversations: expected an array of turns, found \"hi\""},
    {"TurnNotObject", [] { return conversation_with(R"("hi")"); },
     "[0].conversations[0]: expected a turn {\"from\", \"value\"}, found \"hi\""},
    {"MissingValue", [] { return conversation_with(R"({"from": "human"})"); },
     "[0].conversations[0].value: expected a string, found none"},
    {"MissingFrom", [] { return conversation_with(R"({"value": "hi"})"); },
     "[0].conversations[0].from: expected a string, found none"},
    {"FromNotString", [] { return conversation_with(R"({"from": 3, "value": "hi"})"); },
     "[0].conversations[0].from: expected a string, found 3"},
    {"AllConversationsEmpty",
     [] { return std::string(R"([{"conversations": []}, {"conversations": []}])"); },
     "expected at least one conversation with a human turn and a reply after it, found none "
     "among 2 conversations"},
    {"NoConversationsAtAll", [] { return std::string("[]"); },
     "expected at least one conversation with a human turn and a reply after it, found none "
     "among 0 conversations"},
    {"RawNulInValue",
     [] {
       return conversation_with(std::string(R"({"from": "human", "value": "a)") + '\0' + "b\"}");
     },
     "expected a ShareGPT JSON array of conversations, found a NUL byte at byte 61"},
    {"HugeNumber", [] { return std::string(R"([{"id": 1e400, "conversations": []}])"); },
     "expected JSON numbers within the range of a double"},
    // N1: 100,000 levels (200 kB) segfaulted (the refusal's dump() recursed once per level).
    {"DeepNesting", [] { return std::string(100000, '[') + std::string(100000, ']'); },
     "expected at most 32 levels of nesting, found deeper nesting at byte 33"},
    {"DeepTurnValue",
     [] {
       return conversation_with(R"({"from": "human", "value": )" + std::string(100000, '[') +
                                std::string(100000, ']') + "}");
     },
     "expected at most 32 levels of nesting, found deeper nesting at byte 87"},
    {"KeyTwice",
     [] { return conversation_with(R"({"from": "human", "from": "gpt", "value": "hi"})"); },
     "expected each key once per object, found the key \"from\" again at byte 55"},
    {"HugeTurn",
     [] {
       return conversation_with(R"({"from": "human", "value": ")" +
                                std::string((std::size_t{16} << 20) + 1, 'a') + "\"}");
     },
     "[0].conversations[0].value: expected a turn of at most 16 MiB, found 16777217 bytes"},
};

INSTANTIATE_TEST_SUITE_P(Matrix, RequestShareGptBadInput, ::testing::ValuesIn(k_bad_sharegpt),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(RequestShareGpt, MissingFileAndBadTokenizerNameTheirFiles) {
  TempDir dir;
  const std::string tokenizer = write_tokenizer(dir);
  RequestTraceOptions options = with_tokenizer(tokenizer);
  options.format = RequestTraceFormat::sharegpt;
  const std::string missing = dir.path("absent.json");
  EXPECT_EQ(error_of(missing, options),
            missing + ": cannot open the ShareGPT trace: No such file or directory");
  const std::string trace = dir.write("s.json", "[]");
  const std::string bad_tokenizer = dir.write("bad.json", R"({"model": {"type": "Unigram"}})");
  EXPECT_EQ(error_of(trace, with_tokenizer(bad_tokenizer)),
            bad_tokenizer +
                ": model.type: expected \"BPE\" (the only model read here), found \"Unigram\"");
}

}  // namespace
}  // namespace exitsim::traces
