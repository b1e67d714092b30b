// BurstGPT traces: Timestamp (seconds, relative), Session ID, Elapsed time, Model,
// Request tokens, Response tokens, Total tokens, Log Type. Columns are found by name, so a
// reordered or extended export still reads.
#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

constexpr std::string_view k_expected_header =
    "a burstgpt header with columns \"Timestamp\", \"Request tokens\" and \"Response tokens\"";

class BurstGptSource final : public RowSource {
 public:
  BurstGptSource(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::burstgpt, skip_bad_rows,
                  ArrivalPresence::always, Naming{std::string(k_burstgpt_time), ""}) {
    const std::string& path = this->path();
    const std::string_view header = read_header(std::string(k_expected_header));
    if (!is_burstgpt_header(header)) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found(std::string(k_expected_header), quoted_line(header)));
    }
    columns_ = header_columns(header);
    // A column named twice would be read from its first place without a word: refused.
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (columns_[i] == columns_[j]) {
          throw InputError(
              SourceLocation{path, 1, 1, ""},
              expected_found("each column named once", fmt::format("\"{}\" as columns {} and {}",
                                                                   columns_[i], j + 1, i + 1)));
        }
      }
    }
    time_ = *find_column(columns_, k_burstgpt_time);
    request_ = *find_column(columns_, k_burstgpt_request);
    response_ = *find_column(columns_, k_burstgpt_response);
  }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    // A failed request has no response; it never reached a model, so it is no workload.
    if (parse_int64(fields()[response_].text) == 0)
      return std::nullopt;

    const Field& time = fields()[time_];
    ParsedRow row;
    row.time = parse_decimal_seconds(time.text);
    time_text_ = quoted(time.text);
    if (!row.time) {
      fail_at(where, time.column, columns_[time_],
              expected_found("a non-negative decimal number of seconds", time_text_));
    }
    row.time_text = time_text_;
    row.time_column = time.column;
    row.input_tokens = parse_token_count(where, fields()[request_], columns_[request_]);
    row.output_tokens = parse_token_count(where, fields()[response_], columns_[response_]);
    return row;
  }

  std::vector<std::string> columns_;
  std::size_t time_ = 0;
  std::size_t request_ = 0;
  std::size_t response_ = 0;
  std::string time_text_;
};

}  // namespace

bool is_burstgpt_header(std::string_view line) {
  const std::vector<std::string> columns = header_columns(line);
  return find_column(columns, k_burstgpt_time) && find_column(columns, k_burstgpt_request) &&
         find_column(columns, k_burstgpt_response);
}

std::unique_ptr<RequestSource> open_burstgpt_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<BurstGptSource>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
