#include "pre_tokenize.hpp"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utext.h>

#include <memory>
#include <stdexcept>

#include "exitsim/core/error.hpp"

namespace exitsim::text {
namespace {

void check(UErrorCode status, const char* what) {
  if (U_FAILURE(status))
    throw std::runtime_error(std::string("ICU ") + what + ": " + u_errorName(status));
}

// A pattern that backtracks without end on some text (a tokenizer.json's own (a+)+b) is the
// file's fault, not the text's: refused after about this many of ICU's steps (~1 ms each) per
// match, long before a user would give up on it.
constexpr std::int32_t k_match_time_limit = 5000;

struct UTextCloser {
  void operator()(UText* text) const { utext_close(text); }
};

// Appends the pieces of `piece` split on the pattern: each match, and each non-empty stretch
// between matches. ICU walks UTF-8 directly, so match offsets are byte offsets and invalid
// bytes (read as U+FFFD) stay as they were.
void split_on(const BpeModel& model, const icu::RegexPattern& pattern, const std::string& piece,
              std::vector<std::string>& out) {
  UErrorCode status = U_ZERO_ERROR;
  const std::unique_ptr<UText, UTextCloser> input(
      utext_openUTF8(nullptr, piece.data(), static_cast<std::int64_t>(piece.size()), &status));
  check(status, "utext_openUTF8");
  const std::unique_ptr<icu::RegexMatcher> matcher(pattern.matcher(status));
  check(status, "RegexPattern::matcher");
  matcher->reset(input.get());
  // Backtracking over a long run (\s+(?!\S) on a megabyte of spaces) needs more than ICU's
  // default 8 MB of match stack; the run is bounded by the input, so the stack may grow with it.
  matcher->setStackLimit(0, status);
  check(status, "RegexMatcher::setStackLimit");
  matcher->setTimeLimit(k_match_time_limit, status);
  check(status, "RegexMatcher::setTimeLimit");
  const auto check_match = [&] {
    if (U_FAILURE(status)) {
      throw InputError(SourceLocation{model.file, 0, 0, "pre_tokenizer"},
                       expected_found("a split pattern ICU can match on the text",
                                      std::string("ICU error ") + u_errorName(status)));
    }
  };
  std::size_t done = 0;
  while (matcher->find(status)) {
    const auto start = static_cast<std::size_t>(matcher->start64(status));
    const auto end = static_cast<std::size_t>(matcher->end64(status));
    check_match();
    if (end == start)
      continue;
    if (start > done)
      out.push_back(piece.substr(done, start - done));
    out.push_back(piece.substr(start, end - start));
    done = end;
  }
  check_match();
  if (done < piece.size())
    out.push_back(piece.substr(done));
}

std::string nfc(const icu::Normalizer2& normalizer, std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
  // Text already in NFC (nearly all) keeps its bytes, invalid ones included.
  if (normalizer.isNormalized(source, status) && U_SUCCESS(status))
    return std::string(text);
  std::string out;
  normalizer.normalize(source, status).toUTF8String(out);
  check(status, "Normalizer2::normalize");
  return out;
}

}  // namespace

std::vector<std::string> pre_tokenize(const BpeModel& model, std::string_view text) {
  std::vector<std::string> pieces;
  if (text.empty())
    return pieces;
  pieces.push_back(model.nfc != nullptr ? nfc(*model.nfc, text) : std::string(text));
  for (const PreTokenizerStep& step : model.pre_tokenizer) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.add_prefix_space && !piece.starts_with(' '))
        piece.insert(piece.begin(), ' ');
      if (step.pattern != nullptr)
        split_on(model, *step.pattern, piece, next);
      else
        next.push_back(std::move(piece));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace exitsim::text
