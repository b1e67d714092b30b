// ShareGPT conversations (a JSON array of {"id", "conversations": [{"from", "value"}, ...]}) as
// requests, by vLLM's benchmark convention: a conversation's first human turn is the prompt and
// the reply right after it gives the output length, both counted in tokens of the scenario's
// tokenizer.json. Later turns are not replayed. No arrival times.
#include <fmt/format.h>

#include <array>
#include <istream>
#include <nlohmann/json.hpp>
#include <streambuf>

#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"
#include "exitsim/text/bpe_tokenizer.hpp"
#include "exitsim/traces/json_document.hpp"
#include "line_reader.hpp"
#include "readers.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;

// ShareGPT's longest turns are some 100 KB; a turn far longer is not a conversation.
constexpr std::size_t k_max_turn_bytes = std::size_t{16} << 20;
// ShareGPT_V3_unfiltered_cleaned_split.json is 642 MB; the file is streamed, so the cap bounds
// the time spent reading, not memory.
constexpr std::uint64_t k_max_trace_bytes = std::uint64_t{4} << 30;

bool is_prompt_role(const std::string& from) {
  return from == "human" || from == "user";
}

// The one pair of lengths a conversation gives, or why it gives none.
struct Lengths {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
};

class ShareGptReader {
 public:
  ShareGptReader(const std::string& path, const text::BpeTokenizer& tokenizer, bool skip_bad)
      : path_(path),
        tokenizer_(tokenizer),
        template_tokens_(static_cast<std::int64_t>(tokenizer.encode_with_template("").size())),
        skip_bad_(skip_bad) {}

  // Parses the whole file, keeping only each conversation's two lengths: the array is read one
  // conversation at a time (each discarded once counted), so memory does not grow with turns.
  // `opened`: the trace's stream when format detection opened it already (a pipe cannot be
  // opened twice); null: the reader opens the path.
  void read(std::istream* opened) {
    JsonInput input{path_, "a ShareGPT JSON array of conversations", k_max_trace_bytes};
    input.file_kind = "ShareGPT trace";
    const JsonFilter keep_lengths = [this](int depth, json::parse_event_t event, json& parsed) {
      return keep(depth, event, parsed);
    };
    const json root = opened != nullptr ? parse_json(*opened, input, keep_lengths)
                                        : read_json_file(input, keep_lengths);
    if (!root.is_array()) {
      throw InputError(SourceLocation{path_, 0, 0, ""},
                       expected_found("a ShareGPT JSON array of conversations", json_shown(root)));
    }
    if (requests_.empty()) {
      throw InputError(
          SourceLocation{path_, 0, 0, ""},
          expected_found("at least one conversation with a human turn and a reply after it",
                         fmt::format("none among {} conversations", conversations_)));
    }
  }

  std::vector<Lengths> requests_;
  std::int64_t conversations_ = 0;
  std::int64_t without_pair_ = 0;  // no human turn with a non-empty reply: skipped, as vLLM does
  std::int64_t malformed_ = 0;     // skipped under skip_bad_rows

 private:
  // nlohmann's parse callback: called for every value; returning false drops it. Each element of
  // the top-level array is counted when it ends, then dropped.
  bool keep(int depth, json::parse_event_t event, json& parsed) {
    if (depth == 0 && event == json::parse_event_t::object_start)
      top_level_array_ = false;  // kept whole, and refused once read
    const bool element_ends =
        top_level_array_ && depth == 1 &&
        (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end ||
         event == json::parse_event_t::value);
    if (!element_ends)
      return true;
    const std::string at = fmt::format("[{}]", conversations_++);
    try {
      if (const std::optional<Lengths> lengths = conversation(parsed, at))
        requests_.push_back(*lengths);
      else
        ++without_pair_;
    } catch (const InputError&) {
      if (!skip_bad_)
        throw;
      ++malformed_;
    }
    return false;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const {
    throw InputError(SourceLocation{path_, 0, 0, key}, expected_found(expected, found));
  }

  const std::string& turn_text(const json& turn, const std::string& key, const char* name) const {
    const auto it = turn.find(name);
    if (it == turn.end())
      fail(key + "." + name, "a string", "none");
    if (!it->is_string())
      fail(key + "." + name, "a string", json_shown(*it));
    const std::string& value = it->get_ref<const std::string&>();
    if (value.size() > k_max_turn_bytes)
      fail(key + "." + name, "a turn of at most 16 MiB", fmt::format("{} bytes", value.size()));
    return value;
  }

  std::optional<Lengths> conversation(const json& element, const std::string& at) const {
    if (!element.is_object())
      fail(at, "a conversation object with \"conversations\"", json_shown(element));
    const auto turns = element.find("conversations");
    if (turns == element.end())
      fail(at + ".conversations", "an array of turns", "none");
    if (!turns->is_array())
      fail(at + ".conversations", "an array of turns", json_shown(*turns));
    // Every turn is checked, not only the two counted, so a broken file is found whole.
    std::vector<std::pair<std::string, const std::string*>> roles;
    for (std::size_t i = 0; i < turns->size(); ++i) {
      const std::string key = fmt::format("{}.conversations[{}]", at, i);
      const json& turn = (*turns)[i];
      if (!turn.is_object())
        fail(key, "a turn {\"from\", \"value\"}", json_shown(turn));
      roles.emplace_back(turn_text(turn, key, "from"), &turn_text(turn, key, "value"));
    }
    for (std::size_t i = 0; i + 1 < roles.size(); ++i) {
      if (!is_prompt_role(roles[i].first))
        continue;
      const std::string& reply_role = roles[i + 1].first;
      if (is_prompt_role(reply_role) || reply_role == "system")
        return std::nullopt;
      const auto prompt = static_cast<std::int64_t>(tokenizer_.encode(*roles[i].second).size());
      const auto reply = static_cast<std::int64_t>(tokenizer_.encode(*roles[i + 1].second).size());
      if (prompt == 0 || reply == 0)
        return std::nullopt;
      // The prompt as the model sees it, in the template (BOS) as vLLM counts
      // tokenizer(prompt).input_ids; the reply as the model generates it, without one.
      return Lengths{prompt + template_tokens_, reply};
    }
    return std::nullopt;
  }

  std::string path_;
  const text::BpeTokenizer& tokenizer_;
  std::int64_t template_tokens_ = 0;  // the post-processor's tokens around every prompt
  bool skip_bad_ = false;
  bool top_level_array_ = true;
};

class ShareGptSource final : public RequestSource {
 public:
  ShareGptSource(const std::string& path, const std::string& tokenizer_path, bool skip_bad_rows,
                 std::istream* opened) {
    if (tokenizer_path.empty()) {
      throw InputError(
          SourceLocation{path, 0, 0, "workload.trace.tokenizer"},
          expected_found("a tokenizer.json to count the ShareGPT turns' tokens with", "none"));
    }
    const text::BpeTokenizer tokenizer = text::BpeTokenizer::from_file(tokenizer_path);
    ShareGptReader reader(path, tokenizer, skip_bad_rows);
    reader.read(opened);
    requests_ = std::move(reader.requests_);
    conversations_ = reader.conversations_;
    without_pair_ = reader.without_pair_;
    malformed_ = reader.malformed_;
  }

  std::optional<RequestDescriptor> next() override {
    if (next_ == requests_.size())
      return std::nullopt;
    RequestDescriptor request;
    request.id = RequestId{static_cast<std::uint64_t>(next_)};
    request.input_tokens = requests_[next_].input_tokens;
    request.output_tokens = requests_[next_].output_tokens;
    ++next_;
    return request;
  }

  std::int64_t skipped_rows() const override { return without_pair_ + malformed_; }
  bool has_arrivals() const override { return false; }
  std::string format_name() const override { return "sharegpt"; }

  std::vector<std::string> notes() override {
    std::vector<std::string> out;
    if (without_pair_ > 0) {
      out.push_back(
          fmt::format("sharegpt: {} of {} conversations had no human turn with a "
                      "non-empty reply after it and were skipped",
                      without_pair_, conversations_));
    }
    if (malformed_ > 0) {
      out.push_back(
          fmt::format("sharegpt: {} malformed conversations skipped (skip_bad_rows)", malformed_));
    }
    return out;
  }

 private:
  std::vector<Lengths> requests_;
  std::size_t next_ = 0;
  std::int64_t conversations_ = 0;
  std::int64_t without_pair_ = 0;
  std::int64_t malformed_ = 0;
};

// An opened trace from its first byte: the head format detection read, then the rest of its
// stream.
class ContinuedInput final : public std::streambuf {
 public:
  explicit ContinuedInput(TraceInput& input) : input_(input) {
    char* head = input_.head.data();
    setg(head, head, head + input_.head.size());
  }

 private:
  int_type underflow() override {
    if (input_.at_end)
      return traits_type::eof();
    input_.in.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    const std::streamsize got = input_.in.gcount();
    if (got <= 0)
      return traits_type::eof();
    setg(buffer_.data(), buffer_.data(), buffer_.data() + got);
    return traits_type::to_int_type(buffer_[0]);
  }

  TraceInput& input_;
  std::array<char, std::size_t{1} << 16> buffer_{};
};

}  // namespace

std::unique_ptr<RequestSource> open_sharegpt_trace(const std::string& path,
                                                   const std::string& tokenizer_path,
                                                   bool skip_bad_rows) {
  return std::make_unique<ShareGptSource>(path, tokenizer_path, skip_bad_rows, nullptr);
}

std::unique_ptr<RequestSource> open_sharegpt_trace(TraceInput input,
                                                   const std::string& tokenizer_path,
                                                   bool skip_bad_rows) {
  ContinuedInput continued(input);
  std::istream stream(&continued);
  return std::make_unique<ShareGptSource>(input.path, tokenizer_path, skip_bad_rows, &stream);
}

}  // namespace exitsim::traces
