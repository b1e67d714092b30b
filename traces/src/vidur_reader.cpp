// Vidur / Metron length traces: num_prefill_tokens, num_decode_tokens and any further columns
// (num_total_tokens, pd_ratio), which are derived and ignored. No arrival times.
#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

class VidurSource final : public RowSource {
 public:
  VidurSource(const std::string& path, bool skip_bad_rows)
      : RowSource(path, RequestTraceFormat::vidur, skip_bad_rows, ArrivalPresence::never,
                  Naming{"", ""}) {
    const std::string expected =
        "a vidur header starting \"" + std::string(k_vidur_header_prefix) + "\"";
    const std::string_view header = read_header(expected);
    if (!is_vidur_header(header)) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found(expected, quoted_line(header)));
    }
    std::vector<Field> fields;
    split_csv(header, fields);
    for (const Field& field : fields)
      columns_.emplace_back(field.text);
  }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    ParsedRow row;
    row.input_tokens = parse_token_count(where, fields()[0], columns_[0]);
    row.output_tokens = parse_token_count(where, fields()[1], columns_[1]);
    return row;
  }

  std::vector<std::string> columns_;
};

}  // namespace

bool is_vidur_header(std::string_view line) {
  std::vector<Field> fields;
  split_csv(line, fields);
  return fields.size() >= 2 && fields[0].text == "num_prefill_tokens" &&
         fields[1].text == "num_decode_tokens";
}

std::unique_ptr<RequestSource> open_vidur_trace(const std::string& path, bool skip_bad_rows) {
  return std::make_unique<VidurSource>(path, skip_bad_rows);
}

}  // namespace exitsim::traces
