#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fields.hpp"

namespace exitsim::traces {

struct CivilTime {
  Timestamp time;           // in UTC when has_offset; otherwise as written
  bool has_offset = false;  // the text ended in a UTC offset
};

// Parses "YYYY-MM-DD HH:MM:SS" with an optional "." and 1 to 9 fractional digits and an optional
// UTC offset ("Z", "+05:30", "-07:00", as the Azure 2024 traces' "+00:00") into seconds since
// 0000-01-01 00:00:00 (proleptic Gregorian) plus nanoseconds; an offset is subtracted, giving
// UTC. Integer arithmetic only: no time-zone database, no locale, no floating point, so the same
// text always gives the same time. nullopt for any other shape or an impossible date
// (2023-02-29, 24:00:00, +24:00).
std::optional<CivilTime> parse_civil_time(std::string_view text);

// A time without an offset is in an unknown zone: ordering it against UTC times would be a
// guess, so a file keeps to its first row's choice. Returns what was expected when `time` breaks
// that choice (`first_with_offset`, unset before the first row), or "" when it keeps it.
std::string offset_choice_broken(std::optional<bool> first_with_offset, const CivilTime& time);

}  // namespace exitsim::traces
