#pragma once

#include <optional>
#include <string_view>

#include "fields.hpp"

namespace exitsim::traces {

// Parses "YYYY-MM-DD HH:MM:SS" with an optional "." and 1 to 9 fractional digits into seconds
// since 0000-01-01 00:00:00 (proleptic Gregorian) plus nanoseconds. Integer arithmetic only:
// no time zones, no locale, no floating point, so the same text always gives the same time.
// nullopt for any other shape or an impossible date (2023-02-29, 24:00:00).
std::optional<Timestamp> parse_civil_time(std::string_view text);

}  // namespace exitsim::traces
