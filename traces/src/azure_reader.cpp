// Azure LLM inference traces: wall-clock TIMESTAMP, ContextTokens, GeneratedTokens. The 2023
// traces (Splitwise) write times without a zone; the 2024 week-long ones end in a UTC offset.
#include "civil_time.hpp"
#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

class AzureSource final : public RowSource {
 public:
  AzureSource(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::azure, skip_bad_rows,
                  ArrivalPresence::always, Naming{"TIMESTAMP", ""}) {
    const std::string& path = this->path();
    const std::string_view header =
        read_header("the azure header \"" + std::string(k_azure_header) + "\"");
    if (!is_azure_header(header)) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found("the azure header \"" + std::string(k_azure_header) + "\"",
                                      quoted_line(header)));
    }
  }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    const Field& time = fields()[0];
    ParsedRow row;
    const std::optional<CivilTime> civil = parse_civil_time(time.text);
    time_text_ = quoted(time.text);
    if (!civil) {
      fail_at(
          where, time.column, columns_[0],
          expected_found("a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z]", time_text_));
    }
    const std::string broken = offset_choice_broken(with_offset_, *civil);
    if (!broken.empty())
      fail_at(where, time.column, columns_[0], expected_found(broken, time_text_));
    row.time = civil->time;
    row.time_text = time_text_;
    row.time_column = time.column;
    row.input_tokens = parse_token_count(where, fields()[1], columns_[1]);
    row.output_tokens = parse_token_count(where, fields()[2], columns_[2]);
    // Set once the row parsed whole, so a malformed first row does not choose for the file.
    if (!with_offset_)
      with_offset_ = civil->has_offset;
    return row;
  }

  const std::vector<std::string> columns_ = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  std::string time_text_;
  std::optional<bool> with_offset_;  // whether the first well-formed row's time had an offset
};

}  // namespace

bool is_azure_header(std::string_view line) {
  std::vector<Field> fields;
  split_csv(line, fields);
  return fields.size() == 3 && fields[0].text == "TIMESTAMP" && fields[1].text == "ContextTokens" &&
         fields[2].text == "GeneratedTokens";
}

std::unique_ptr<RequestSource> open_azure_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<AzureSource>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
