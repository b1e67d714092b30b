#pragma once

#include <charconv>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/request.hpp"

namespace exitsim::traces {

// The line a row came from, for error messages.
struct RowContext {
  std::string_view file;
  std::int64_t line = 0;
};

// One CSV field and the 1-based column where its text starts in the physical line.
using Field = CsvField;

inline constexpr std::int64_t k_max_tokens = k_max_request_tokens;

// A point in time as whole seconds plus nanoseconds from a format-specific origin. Splitting
// keeps wall-clock dates (seconds since year 0) representable where plain int64 nanoseconds
// would overflow; only differences between rows are turned into nanoseconds.
struct Timestamp {
  std::int64_t seconds = 0;
  std::int64_t nanos = 0;  // [0, 1e9)
  friend auto operator<=>(const Timestamp&, const Timestamp&) = default;
};

[[noreturn]] void fail_at(const RowContext& where, std::int64_t column, std::string_view field,
                          const std::string& message);

// How a field's text appears in a message: "\"abc\"" (cut to 60 bytes), or "an empty field".
std::string quoted(std::string_view text);
// The same for a whole line (headers): "an empty line" when empty.
std::string quoted_line(std::string_view text);

// A header line's column names, and where one is (nullopt when absent): readers that find their
// columns by name (BurstGPT, TraceV2) share them.
std::vector<std::string> header_columns(std::string_view line);
std::optional<std::size_t> find_column(const std::vector<std::string>& columns,
                                       std::string_view name);

// Splits on commas; surrounding spaces and tabs are trimmed. Quoted fields are not supported:
// none of the supported formats quotes its fields.
inline void split_csv(std::string_view line, std::vector<Field>& out) {
  split_csv_fields(line, out);
}

// At most this many bytes of a found value are quoted in a message.
inline constexpr std::size_t k_max_quoted_bytes = 60;

// A whole-field integer parse with std::from_chars, shared by the request-trace readers and the
// token/op-trace readers (trace_io.hpp).
template <typename Int>
struct IntegerParse {
  std::optional<Int> value;  // the whole text as an in-range Int; nullopt otherwise
  bool overflow = false;     // the text starts with an integer outside Int's range
};

template <typename Int>
IntegerParse<Int> parse_integer(std::string_view text) {
  Int value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  IntegerParse<Int> result;
  result.overflow = ec == std::errc::result_out_of_range;
  if (ec == std::errc{} && ptr == end && !text.empty())
    result.value = value;
  return result;
}

// Whole-field integer parses: nullopt on any leftover text or overflow.
inline std::optional<std::int64_t> parse_int64(std::string_view text) {
  return parse_integer<std::int64_t>(text).value;
}
inline std::optional<std::uint64_t> parse_uint64(std::string_view text) {
  return parse_integer<std::uint64_t>(text).value;
}

// A token count in [1, k_max_tokens]; throws InputError naming the field otherwise.
std::int64_t parse_token_count(const RowContext& where, const Field& field, std::string_view name);
std::int64_t check_token_count(const RowContext& where, std::int64_t value, std::int64_t column,
                               std::string_view name);

// "12", "12.", "12.345" as seconds, rounded to the nanosecond; nullopt for anything else
// (signs, exponents, spaces). Parsed as decimal digits so no binary floating-point error creeps
// into arrival times.
std::optional<Timestamp> parse_decimal_seconds(std::string_view text);

// A non-negative decimal number, optionally with an exponent ("1.5", "2e-05", "3E+2"), times
// 10^scale_exponent seconds (0: seconds, -3: milliseconds, -9: nanoseconds), rounded to the
// nanosecond. The digits are moved, not multiplied, so the result is exact: Python and pandas
// write floats such as 1e-05 in exponent form. nullopt for anything else (signs on the mantissa,
// nan, inf, an exponent beyond +-400) or a time past int64 seconds.
std::optional<Timestamp> parse_scaled_decimal_seconds(std::string_view text, int scale_exponent);

}  // namespace exitsim::traces
