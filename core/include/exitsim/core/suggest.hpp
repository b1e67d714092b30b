#pragma once

#include <span>
#include <string>
#include <string_view>

namespace exitsim {

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a
// plausible typo. Used for "did you mean" hints on unknown keys and enum values.
std::string nearest_match(std::string_view word, std::span<const std::string> candidates);

// "one of a, b, c" for messages.
std::string one_of(std::span<const std::string> candidates);

}  // namespace exitsim
