// Azure LLM inference traces (Splitwise, 2023): wall-clock TIMESTAMP, ContextTokens,
// GeneratedTokens.
#include "civil_time.hpp"
#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

class AzureSource final : public RowSource {
 public:
  AzureSource(const std::string& path, bool skip_bad_rows)
      : RowSource(path, RequestTraceFormat::azure, skip_bad_rows, ArrivalPresence::always,
                  Naming{"TIMESTAMP", ""}) {
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
    row.time = parse_civil_time(time.text);
    time_text_ = quoted(time.text);
    if (!row.time) {
      fail_at(where, time.column, columns_[0],
              expected_found("a date and time YYYY-MM-DD HH:MM:SS.fffffff", time_text_));
    }
    row.time_text = time_text_;
    row.time_column = time.column;
    row.input_tokens = parse_token_count(where, fields()[1], columns_[1]);
    row.output_tokens = parse_token_count(where, fields()[2], columns_[2]);
    return row;
  }

  const std::vector<std::string> columns_ = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  std::string time_text_;
};

}  // namespace

bool is_azure_header(std::string_view line) {
  std::vector<Field> fields;
  split_csv(line, fields);
  return fields.size() == 3 && fields[0].text == "TIMESTAMP" && fields[1].text == "ContextTokens" &&
         fields[2].text == "GeneratedTokens";
}

std::unique_ptr<RequestSource> open_azure_trace(const std::string& path, bool skip_bad_rows) {
  return std::make_unique<AzureSource>(path, skip_bad_rows);
}

}  // namespace exitsim::traces
