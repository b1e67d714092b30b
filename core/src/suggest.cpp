#include "exitsim/core/suggest.hpp"

#include <algorithm>
#include <vector>

namespace exitsim {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_match(std::string_view word, std::span<const std::string> candidates) {
  std::string best;
  std::size_t best_distance = 0;
  // A key typed without its unit suffix ("ttft" for "ttft_ms") is as likely a slip as a typo,
  // when the prefix points at one candidate only.
  std::size_t prefix_matches = 0;
  for (const std::string& candidate : candidates) {
    if (word.size() >= 3 && std::string_view(candidate).starts_with(word))
      ++prefix_matches;
  }
  for (const std::string& candidate : candidates) {
    const bool prefix =
        prefix_matches == 1 && word.size() >= 3 && std::string_view(candidate).starts_with(word);
    const std::size_t d = prefix ? 1 : edit_distance(word, candidate);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // Beyond a third of the word's length the "suggestion" is noise rather than a likely typo.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_distance <= limit ? best : std::string{};
}

std::string one_of(std::span<const std::string> candidates) {
  std::string out = "one of ";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += candidates[i];
  }
  return out;
}

}  // namespace exitsim
