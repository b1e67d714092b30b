#include "fields.hpp"

#include <algorithm>
#include <limits>

#include "exitsim/core/error.hpp"

namespace exitsim::traces {
namespace {

constexpr std::int64_t k_ns_per_s = 1'000'000'000;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

void fail_at(const RowContext& where, std::int64_t column, std::string_view field,
             const std::string& message) {
  throw InputError(SourceLocation{std::string(where.file), where.line, column, std::string(field)},
                   message);
}

std::string quoted(std::string_view text) {
  if (text.empty())
    return "an empty field";
  if (text.size() > k_max_quoted_bytes) {
    std::size_t cut = k_max_quoted_bytes;
    // Never split a UTF-8 sequence: back off over continuation bytes (10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U)
      --cut;
    text = text.substr(0, cut);
  }
  return "\"" + std::string(text) + "\"";
}

std::string quoted_line(std::string_view text) {
  return text.empty() ? "an empty line" : quoted(text);
}

std::int64_t check_token_count(const RowContext& where, std::int64_t value, std::int64_t column,
                               std::string_view name) {
  if (value < 1) {
    fail_at(where, column, name,
            expected_found("a token count of at least 1", std::to_string(value)));
  }
  if (value > k_max_tokens) {
    fail_at(where, column, name,
            expected_found("a token count of at most " + std::to_string(k_max_tokens),
                           std::to_string(value)));
  }
  return value;
}

std::int64_t parse_token_count(const RowContext& where, const Field& field, std::string_view name) {
  const auto value = parse_int64(field.text);
  if (value)
    return check_token_count(where, *value, field.column, name);
  // A well-formed integer that overflows int64 is a range problem, not a syntax one.
  const std::string_view digits = field.text.starts_with('-') ? field.text.substr(1) : field.text;
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    const std::string limit = field.text.starts_with('-')
                                  ? "a token count of at least 1"
                                  : "a token count of at most " + std::to_string(k_max_tokens);
    fail_at(where, field.column, name, expected_found(limit, std::string(field.text)));
  }
  fail_at(where, field.column, name, expected_found("an integer token count", quoted(field.text)));
}

std::optional<Timestamp> parse_decimal_seconds(std::string_view text) {
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() || !is_digit(whole[0]))
    return std::nullopt;
  auto seconds = parse_int64(whole);
  if (!seconds)
    return std::nullopt;
  std::int64_t nanos = 0;
  for (std::size_t i = 0; i < fraction.size(); ++i) {
    if (!is_digit(fraction[i]))
      return std::nullopt;
    if (i < 9)
      nanos = nanos * 10 + (fraction[i] - '0');
  }
  for (std::size_t i = fraction.size(); i < 9; ++i)
    nanos *= 10;
  if (fraction.size() > 9 && fraction[9] >= '5')
    ++nanos;  // round half up at the nanosecond
  if (nanos == k_ns_per_s) {
    if (*seconds == std::numeric_limits<std::int64_t>::max())
      return std::nullopt;
    ++*seconds;
    nanos = 0;
  }
  return Timestamp{*seconds, nanos};
}

std::optional<Timestamp> parse_scaled_decimal_seconds(std::string_view text, int scale_exponent) {
  constexpr int k_max_exponent = 400;
  const std::size_t e = text.find_first_of("eE");
  const std::string_view mantissa = text.substr(0, e);
  int exponent = scale_exponent;
  if (e != std::string_view::npos) {
    std::string_view power = text.substr(e + 1);
    if (power.starts_with('+') && power.size() > 1 && is_digit(power[1]))
      power.remove_prefix(1);
    const auto value = parse_integer<int>(power).value;
    if (!value || *value > k_max_exponent || *value < -k_max_exponent)
      return std::nullopt;
    exponent += *value;
  }
  const std::size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view{} : mantissa.substr(dot + 1);
  if (whole.empty() || !is_digit(whole[0]))
    return std::nullopt;
  // All digits, with the decimal point `point` digits from the left once the exponent moved it.
  const std::string digits = std::string(whole) + std::string(fraction);
  if (digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const std::int64_t point = static_cast<std::int64_t>(whole.size()) + exponent;
  std::string shifted;
  if (point <= 0) {
    shifted = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= static_cast<std::int64_t>(digits.size())) {
    shifted = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    const auto split = static_cast<std::size_t>(point);
    shifted = digits.substr(0, split) + "." + digits.substr(split);
  }
  // Leading zeros would make an in-range number look like an overflow to parse_int64.
  const std::size_t first = shifted.find_first_not_of('0');
  if (first == std::string::npos)
    return Timestamp{0, 0};
  if (shifted[first] == '.')
    shifted.erase(0, first - 1);
  else
    shifted.erase(0, first);
  return parse_decimal_seconds(shifted);
}

std::vector<std::string> header_columns(std::string_view line) {
  std::vector<Field> fields;
  split_csv(line, fields);
  std::vector<std::string> columns;
  for (const Field& field : fields)
    columns.emplace_back(field.text);
  return columns;
}

std::optional<std::size_t> find_column(const std::vector<std::string>& columns,
                                       std::string_view name) {
  const auto it = std::find(columns.begin(), columns.end(), name);
  if (it == columns.end())
    return std::nullopt;
  return static_cast<std::size_t>(it - columns.begin());
}

}  // namespace exitsim::traces
