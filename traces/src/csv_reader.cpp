// A generic CSV read through a column mapping (RequestTraceOptions::columns): the header names
// the columns, the mapping says which hold the arrival time and the two lengths; any other
// columns are ignored. Never detected: a header alone cannot say what its columns mean.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "civil_time.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

struct ArrivalUnit {
  std::string_view name;
  int scale_exponent;     // the number's unit as a power of ten of a second
  std::string_view noun;  // for messages
};

// datetime is handled apart: civil times, not numbers.
constexpr std::array<ArrivalUnit, 4> k_numeric_units = {{
    {"s", 0, "seconds"},
    {"ms", -3, "milliseconds"},
    {"us", -6, "microseconds"},
    {"ns", -9, "nanoseconds"},
}};
constexpr std::string_view k_datetime = "datetime";

// The header's names, as many as fit in a message.
std::string listed(const std::vector<std::string>& names) {
  constexpr std::size_t k_listed = 8;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < k_listed; ++i)
    out += (i == 0 ? "\"" : ", \"") + names[i].substr(0, k_max_quoted_bytes) + "\"";
  if (names.size() > k_listed)
    out += fmt::format(" and {} more", names.size() - k_listed);
  return out;
}

class CsvSource final : public RowSource {
 public:
  CsvSource(TraceInput input, bool skip_bad_rows, const CsvColumnMapping& mapping)
      : RowSource(std::move(input), RequestTraceFormat::csv, skip_bad_rows,
                  ArrivalPresence::as_first_row, Naming{mapping.arrival, ""}) {
    const std::string& path = this->path();
    check_unit(path, mapping);
    const std::string_view header = read_header("a CSV header naming the columns");
    std::vector<Field> fields;
    split_csv(header, fields);
    for (const Field& field : fields)
      columns_.emplace_back(field.text);
    if (!mapping.arrival.empty())
      time_ = find(path, mapping, "arrival", mapping.arrival);
    input_ = find(path, mapping, "input_tokens", mapping.input_tokens);
    output_ = find(path, mapping, "output_tokens", mapping.output_tokens);
    set_arrivals_present(time_.has_value());
  }

 private:
  void check_unit(const std::string& path, const CsvColumnMapping& mapping) {
    if (mapping.arrival_unit == k_datetime)
      return;
    for (const ArrivalUnit& unit : k_numeric_units) {
      if (unit.name == mapping.arrival_unit) {
        unit_ = unit;
        return;
      }
    }
    throw InputError(
        SourceLocation{path, 0, 0, mapping.key_prefix + ".arrival_unit"},
        expected_found(one_of(csv_arrival_unit_names()), "\"" + mapping.arrival_unit + "\""));
  }

  // The index of the column `name` maps `key` to; throws naming the file's line 1 and the key.
  std::size_t find(const std::string& path, const CsvColumnMapping& mapping, std::string_view key,
                   const std::string& name) const {
    const std::string key_path = mapping.key_prefix + "." + std::string(key);
    if (name.empty()) {
      throw InputError(SourceLocation{path, 1, 1, key_path},
                       expected_found("the name of the column holding " + std::string(key) +
                                          " (format csv reads columns by name)",
                                      "none"));
    }
    const auto first = std::find(columns_.begin(), columns_.end(), name);
    if (first == columns_.end()) {
      std::string found = quoted(name);
      const std::string hint = nearest_match(name, columns_);
      if (!hint.empty())
        found += " (did you mean \"" + hint + "\"?)";
      throw InputError(SourceLocation{path, 1, 1, key_path},
                       expected_found("a column of the header (" + listed(columns_) + ")", found));
    }
    // A name twice would be read from its first place without a word: refused.
    const auto second = std::find(first + 1, columns_.end(), name);
    if (second != columns_.end()) {
      throw InputError(
          SourceLocation{path, 1, 1, key_path},
          expected_found("a column named once in the header",
                         fmt::format("\"{}\" as columns {} and {}", name,
                                     first - columns_.begin() + 1, second - columns_.begin() + 1)));
    }
    return static_cast<std::size_t>(first - columns_.begin());
  }

  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    ParsedRow row;
    if (time_) {
      const Field& time = fields()[*time_];
      time_text_ = quoted(time.text);
      row.time = unit_ ? parse_numeric_time(where, time) : parse_datetime(where, time);
      row.time_text = time_text_;
      row.time_column = time.column;
    }
    row.input_tokens = parse_token_count(where, fields()[input_], columns_[input_]);
    row.output_tokens = parse_token_count(where, fields()[output_], columns_[output_]);
    if (pending_with_offset_)
      with_offset_ = pending_with_offset_;
    return row;
  }

  Timestamp parse_numeric_time(const RowContext& where, const Field& time) const {
    const std::optional<Timestamp> value =
        parse_scaled_decimal_seconds(time.text, unit_->scale_exponent);
    if (!value) {
      fail_at(where, time.column, columns_[*time_],
              expected_found("a non-negative decimal number of " + std::string(unit_->noun),
                             time_text_));
    }
    return *value;
  }

  Timestamp parse_datetime(const RowContext& where, const Field& time) {
    const std::optional<CivilTime> civil = parse_civil_time(time.text);
    if (!civil) {
      fail_at(
          where, time.column, columns_[*time_],
          expected_found("a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z]", time_text_));
    }
    const std::string broken = offset_choice_broken(with_offset_, *civil);
    if (!broken.empty())
      fail_at(where, time.column, columns_[*time_], expected_found(broken, time_text_));
    // Taken as the file's choice only once the whole row parsed (see parse()).
    pending_with_offset_ = civil->has_offset;
    return civil->time;
  }

  std::vector<std::string> columns_;
  std::optional<std::size_t> time_;
  std::size_t input_ = 0;
  std::size_t output_ = 0;
  std::optional<ArrivalUnit> unit_;  // unset: datetime
  std::string time_text_;
  std::optional<bool> with_offset_;  // datetime: whether the first good row's time had one
  std::optional<bool> pending_with_offset_;
};

}  // namespace

std::vector<std::string> csv_arrival_unit_names() {
  std::vector<std::string> names;
  for (const ArrivalUnit& unit : k_numeric_units)
    names.emplace_back(unit.name);
  names.emplace_back(k_datetime);
  return names;
}

std::unique_ptr<RequestSource> open_csv_trace(TraceInput input, bool skip_bad_rows,
                                              const CsvColumnMapping& columns) {
  return std::make_unique<CsvSource>(std::move(input), skip_bad_rows, columns);
}

}  // namespace exitsim::traces
