#include "civil_time.hpp"

#include <array>
#include <cstdint>

namespace exitsim::traces {
namespace {

constexpr std::int64_t k_seconds_per_day = 86'400;

bool is_leap(std::int64_t year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

std::int64_t days_in_month(std::int64_t year, std::int64_t month) {
  constexpr std::array<std::int64_t, 12> k_days = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : k_days[static_cast<std::size_t>(month - 1)];
}

// Days from 0000-01-01 to the given date. Year 0 is a leap year (divisible by 400); the three
// divisions count the leap years among 0 .. year-1.
std::int64_t days_since_year_zero(std::int64_t year, std::int64_t month, std::int64_t day) {
  std::int64_t days = 365 * year + (year + 3) / 4 - (year + 99) / 100 + (year + 399) / 400;
  for (std::int64_t m = 1; m < month; ++m)
    days += days_in_month(year, m);
  return days + day - 1;
}

// Reads exactly `width` digits at `pos`.
std::optional<std::int64_t> digits(std::string_view text, std::size_t pos, std::size_t width) {
  if (pos + width > text.size())
    return std::nullopt;
  std::int64_t value = 0;
  for (std::size_t i = pos; i < pos + width; ++i) {
    if (text[i] < '0' || text[i] > '9')
      return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool separator(std::string_view text, std::size_t pos, char c) {
  return pos < text.size() && text[pos] == c;
}

// Parses a UTC offset: "Z", or "+HH:MM" / "-HH:MM" with HH <= 23 and MM <= 59 (the forms
// Python's isoformat and pandas write). Returns the offset in seconds east of UTC.
std::optional<std::int64_t> offset_seconds(std::string_view text) {
  if (text == "Z")
    return 0;
  if (text.size() != 6 || (text[0] != '+' && text[0] != '-') || text[3] != ':')
    return std::nullopt;
  const auto hours = digits(text, 1, 2);
  const auto minutes = digits(text, 4, 2);
  if (!hours || !minutes || *hours > 23 || *minutes > 59)
    return std::nullopt;
  const std::int64_t seconds = *hours * 3600 + *minutes * 60;
  return text[0] == '-' ? -seconds : seconds;
}

}  // namespace

std::optional<CivilTime> parse_civil_time(std::string_view text) {
  // Layout: YYYY-MM-DD HH:MM:SS[.f...][Z|+HH:MM|-HH:MM]
  //         0    5  8  11 14 17 19
  const auto year = digits(text, 0, 4);
  const auto month = digits(text, 5, 2);
  const auto day = digits(text, 8, 2);
  const auto hour = digits(text, 11, 2);
  const auto minute = digits(text, 14, 2);
  const auto second = digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second)
    return std::nullopt;
  if (!separator(text, 4, '-') || !separator(text, 7, '-') || !separator(text, 10, ' ') ||
      !separator(text, 13, ':') || !separator(text, 16, ':')) {
    return std::nullopt;
  }
  if (*month < 1 || *month > 12 || *day < 1 || *day > days_in_month(*year, *month) || *hour > 23 ||
      *minute > 59 || *second > 59) {
    return std::nullopt;
  }

  std::size_t pos = 19;
  std::int64_t nanos = 0;
  if (separator(text, pos, '.')) {
    const std::size_t fraction_start = pos + 1;
    std::size_t fraction_end = fraction_start;
    while (fraction_end < text.size() && text[fraction_end] >= '0' && text[fraction_end] <= '9')
      ++fraction_end;
    const std::size_t fraction_digits = fraction_end - fraction_start;
    if (fraction_digits < 1 || fraction_digits > 9)
      return std::nullopt;
    nanos = *digits(text, fraction_start, fraction_digits);
    for (std::size_t i = fraction_digits; i < 9; ++i)
      nanos *= 10;
    pos = fraction_end;
  }

  CivilTime result;
  std::int64_t offset = 0;
  if (pos < text.size()) {
    const auto parsed = offset_seconds(text.substr(pos));
    if (!parsed)
      return std::nullopt;
    offset = *parsed;
    result.has_offset = true;
  }

  const std::int64_t days = days_since_year_zero(*year, *month, *day);
  result.time =
      Timestamp{days * k_seconds_per_day + *hour * 3600 + *minute * 60 + *second - offset, nanos};
  return result;
}

std::string offset_choice_broken(std::optional<bool> first_with_offset, const CivilTime& time) {
  if (!first_with_offset || *first_with_offset == time.has_offset)
    return "";
  return *first_with_offset ? "a time with a UTC offset, as the first row's"
                            : "a time without a UTC offset, as the first row's";
}

}  // namespace exitsim::traces
