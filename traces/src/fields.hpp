#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::traces {

// The line a row came from, for error messages.
struct RowContext {
  std::string_view file;
  std::int64_t line = 0;
};

// One CSV field and the 1-based column where its text starts in the physical line.
struct Field {
  std::string_view text;
  std::int64_t column = 0;
};

// Token counts above this are rejected: no model has such a context, and the limit keeps every
// later sum of a few lengths far from int64 overflow.
inline constexpr std::int64_t k_max_tokens = std::int64_t{1} << 31;

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

// Splits on commas; surrounding spaces and tabs are trimmed. Quoted fields are not supported:
// none of the supported formats quotes its fields.
void split_csv(std::string_view line, std::vector<Field>& out);

// Whole-field integer parses with std::from_chars: nullopt on any leftover text or overflow.
std::optional<std::int64_t> parse_int64(std::string_view text);
std::optional<std::uint64_t> parse_uint64(std::string_view text);

// A token count in [1, k_max_tokens]; throws InputError naming the field otherwise.
std::int64_t parse_token_count(const RowContext& where, const Field& field, std::string_view name);
std::int64_t check_token_count(const RowContext& where, std::int64_t value, std::int64_t column,
                               std::string_view name);

// "12", "12.", "12.345" as seconds, rounded to the nanosecond; nullopt for anything else
// (signs, exponents, spaces). Parsed as decimal digits so no binary floating-point error creeps
// into arrival times.
std::optional<Timestamp> parse_decimal_seconds(std::string_view text);

}  // namespace exitsim::traces
