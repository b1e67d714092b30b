#include "exitsim/engine/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/input_file.hpp"
#include "exitsim/core/random.hpp"

namespace exitsim::engine {
namespace {

constexpr std::string_view k_utf8_bom = "\xEF\xBB\xBF";
constexpr std::size_t k_max_shown_bytes = 60;

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

// A well-formed integer too large for its message is cut like a quoted field, but unquoted:
// it is a number, only one nobody can use.
std::string shown_number(std::string_view text) {
  if (text.size() <= k_max_shown_bytes)
    return std::string(text);
  return std::string(text.substr(0, k_max_shown_bytes)) + "...";
}

// One whitespace-separated field of a token-id line as an id in [0, limit].
std::int32_t parse_token_id(std::string_view text, std::int64_t limit, const SourceLocation& at,
                            std::int64_t vocab) {
  const std::string range = fmt::format("a token id in [0, {}] (vocab {})", limit, vocab);
  const std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    throw InputError(at, expected_found("a token id (a non-negative integer)", quote_field(text)));
  }
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || value < 0 || value > limit)
    throw InputError(at, expected_found(range, shown_number(text)));
  return static_cast<std::int32_t>(value);
}

}  // namespace

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  for (const char c : text)
    ids.push_back(static_cast<std::int32_t>(static_cast<unsigned char>(c)));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id < 0)
      throw std::invalid_argument(fmt::format("ByteTokenizer::decode: negative token id {}", id));
    if (id < k_byte_tokens)
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

std::vector<std::vector<std::int32_t>> read_token_id_file(const std::string& path,
                                                          std::int64_t vocab) {
  if (vocab < 1)
    throw std::invalid_argument(fmt::format("read_token_id_file: vocab {} < 1", vocab));
  // Ids are int32 whatever the vocabulary claims.
  const std::int64_t limit =
      std::min(vocab, std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1) - 1;
  std::ifstream in = open_input_file(path, "token-id file");
  std::vector<std::vector<std::int32_t>> documents;
  std::string line;
  std::int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    std::string_view text = line;
    if (line_number == 1 && text.starts_with(k_utf8_bom))
      text.remove_prefix(k_utf8_bom.size());
    std::size_t pos = 0;
    while (pos < text.size() && is_blank(text[pos]))
      ++pos;
    if (pos == text.size() || text[pos] == '#')
      continue;
    std::vector<std::int32_t>& ids = documents.emplace_back();
    while (pos < text.size()) {
      std::size_t end = pos;
      while (end < text.size() && !is_blank(text[end]))
        ++end;
      const SourceLocation at{path, line_number, static_cast<std::int64_t>(pos) + 1, "token_id"};
      ids.push_back(parse_token_id(text.substr(pos, end - pos), limit, at, vocab));
      pos = end;
      while (pos < text.size() && is_blank(text[pos]))
        ++pos;
    }
  }
  if (in.bad()) {
    throw InputError(SourceLocation{path, line_number + 1, 0, ""},
                     fmt::format("cannot read the token-id file: {}", std::strerror(errno)));
  }
  if (documents.empty()) {
    throw InputError(SourceLocation{path, line_number + 1, 0, "document"},
                     "expected at least one line of token ids, found end of file");
  }
  return documents;
}

std::string read_text_file(const std::string& path) {
  // Evaluation texts and prompt corpora are megabytes; /dev/zero or a mistaken disk image must
  // not be read until memory runs out.
  constexpr std::size_t k_max_text_bytes = std::size_t{1} << 30;
  return read_bounded_file(path, "text file", k_max_text_bytes);
}

PromptSource::PromptSource(std::vector<std::int32_t> corpus, std::uint64_t seed)
    : corpus_(std::move(corpus)), seed_(seed) {
  if (corpus_.empty()) {
    throw InputError(SourceLocation{"", 0, 0, "workload"},
                     expected_found("a prompt corpus of at least one token", "an empty one"));
  }
}

std::vector<std::int32_t> PromptSource::prompt(RequestId id, std::int64_t length) const {
  if (length < 0)
    throw std::invalid_argument(fmt::format("PromptSource::prompt: negative length {}", length));
  const auto size = static_cast<std::int64_t>(corpus_.size());
  // A stream per request, so a prompt never depends on which prompts were cut before it.
  RandomStream stream(seed_, fmt::format("engine.prompt.{}", id.value));
  const std::int64_t offset = stream.uniform_int(0, length <= size ? size - length : size - 1);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i)
    out.push_back(corpus_[static_cast<std::size_t>((offset + i) % size)]);
  return out;
}

}  // namespace exitsim::engine
