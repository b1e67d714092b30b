// Vidur traces, two layouts told apart by the header:
// - length traces (Vidur / Metron): num_prefill_tokens, num_decode_tokens; no arrival times;
// - arrival traces (e.g. splitwise_conv.csv): arrived_at (seconds from the trace start), then
//   num_prefill_tokens, num_decode_tokens.
// Any further columns (num_total_tokens, pd_ratio, request_id) are derived or ours to ignore.
#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

// The header's first column names, fields[0..2]; whether they name a Vidur trace and which.
enum class VidurLayout : std::uint8_t { none, lengths, arrivals };

VidurLayout layout_of(const std::vector<Field>& fields) {
  if (fields.size() >= 2 && fields[0].text == "num_prefill_tokens" &&
      fields[1].text == "num_decode_tokens") {
    return VidurLayout::lengths;
  }
  if (fields.size() >= 3 && fields[0].text == "arrived_at" &&
      fields[1].text == "num_prefill_tokens" && fields[2].text == "num_decode_tokens") {
    return VidurLayout::arrivals;
  }
  return VidurLayout::none;
}

class VidurSource final : public RowSource {
 public:
  VidurSource(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::vidur, skip_bad_rows,
                  ArrivalPresence::as_first_row, Naming{"arrived_at", ""}) {
    const std::string& path = this->path();
    const std::string expected = "a vidur header starting \"" + std::string(k_vidur_header_prefix) +
                                 "\" or \"" + std::string(k_vidur_arrival_header_prefix) + "\"";
    const std::string_view header = read_header(expected);
    std::vector<Field> fields;
    split_csv(header, fields);
    const VidurLayout layout = layout_of(fields);
    if (layout == VidurLayout::none) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found(expected, quoted_line(header)));
    }
    for (const Field& field : fields)
      columns_.emplace_back(field.text);
    arrivals_ = layout == VidurLayout::arrivals;
    set_arrivals_present(arrivals_);
  }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    ParsedRow row;
    std::size_t lengths = 0;
    if (arrivals_) {
      const Field& time = fields()[0];
      row.time = parse_scaled_decimal_seconds(time.text, 0);
      time_text_ = quoted(time.text);
      if (!row.time) {
        fail_at(where, time.column, columns_[0],
                expected_found("a non-negative decimal number of seconds", time_text_));
      }
      row.time_text = time_text_;
      row.time_column = time.column;
      lengths = 1;
    }
    row.input_tokens = parse_token_count(where, fields()[lengths], columns_[lengths]);
    row.output_tokens = parse_token_count(where, fields()[lengths + 1], columns_[lengths + 1]);
    return row;
  }

  std::vector<std::string> columns_;
  bool arrivals_ = false;
  std::string time_text_;
};

}  // namespace

bool is_vidur_header(std::string_view line) {
  std::vector<Field> fields;
  split_csv(line, fields);
  return layout_of(fields) != VidurLayout::none;
}

std::unique_ptr<RequestSource> open_vidur_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<VidurSource>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
