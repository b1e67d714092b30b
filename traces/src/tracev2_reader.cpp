// BLIS (inference-sim) TraceV2 data files: the CSV half of a TraceV2 trace, whose other half is
// a YAML header (trace_version, time_unit, mode, ...) that this reader does not need. Columns are
// found by name, so the optional ones BLIS inserts (vllm_priority, slo_target_us, x_request_id,
// adapter) and later additions read. What a request is follows BLIS's own replay
// (sim/workload/replay.go):
// - arrival: arrival_time_us, in microseconds (BLIS injects at send_time_us when that is set; it
//   equals arrival_time_us in generated traces, and in observed ones it adds the client's wait
//   for a concurrency slot, which is not the workload's arrival);
// - prompt: prefix_length + input_tokens when the row names a prefix_group (input_tokens then
//   counts only the suffix), else server_input_tokens when above 0, else input_tokens;
// - output: output_tokens.
// Every row is a request whatever its status, as in BLIS's replay.
#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

constexpr std::int64_t k_us_per_s = 1'000'000;
constexpr std::int64_t k_ns_per_us = 1'000;

// Splits a line as Go's encoding/csv writes it: a field holding a comma, a quote or a leading
// space is quoted, quotes doubled inside. The view of a quoted field is its inner text with the
// quotes still doubled (no field this reader interprets is ever quoted). A quoted line break
// would need the next physical line: refused rather than misread.
void split_go_csv(std::string_view line, const RowContext& where, std::vector<Field>& out) {
  out.clear();
  std::size_t pos = 0;
  while (true) {
    if (pos < line.size() && line[pos] == '"') {
      std::size_t end = pos + 1;
      while (true) {
        end = line.find('"', end);
        if (end == std::string_view::npos) {
          fail_at(where, static_cast<std::int64_t>(pos) + 1, "",
                  expected_found("a closing quote on the same line (quoted line breaks are not "
                                 "supported)",
                                 "the end of the line"));
        }
        if (end + 1 < line.size() && line[end + 1] == '"') {
          end += 2;
          continue;
        }
        break;
      }
      out.push_back(Field{line.substr(pos + 1, end - pos - 1), static_cast<std::int64_t>(pos) + 2});
      pos = end + 1;
      if (pos == line.size())
        return;
      if (line[pos] != ',') {
        fail_at(where, static_cast<std::int64_t>(pos) + 1, "",
                expected_found("a comma after a closing quote", quoted(line.substr(pos, 1))));
      }
      ++pos;
      continue;
    }
    const std::size_t comma = line.find(',', pos);
    const std::string_view text = line.substr(pos, comma - pos);
    out.push_back(Field{text, static_cast<std::int64_t>(pos) + 1});
    if (comma == std::string_view::npos)
      return;
    pos = comma + 1;
  }
}

class TraceV2Source final : public RowSource {
 public:
  TraceV2Source(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::tracev2, skip_bad_rows,
                  ArrivalPresence::always, Naming{std::string(k_tracev2_arrival), ""}) {
    const std::string& path = this->path();
    const std::string expected = "a tracev2 header with columns " + tracev2_required_columns();
    const std::string_view header = read_header(expected);
    if (!is_tracev2_header(header)) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found(expected, quoted_line(header)));
    }
    columns_ = header_columns(header);
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      const auto first = find_column(columns_, columns_[i]);
      if (*first != i) {
        throw InputError(
            SourceLocation{path, 1, 1, ""},
            expected_found("each column named once", fmt::format("\"{}\" as columns {} and {}",
                                                                 columns_[i], *first + 1, i + 1)));
      }
    }
    arrival_ = *find_column(columns_, k_tracev2_arrival);
    input_ = *find_column(columns_, k_tracev2_input);
    output_ = *find_column(columns_, k_tracev2_output);
    prefix_group_ = find_column(columns_, "prefix_group");
    prefix_length_ = find_column(columns_, "prefix_length");
    server_input_ = find_column(columns_, "server_input_tokens");
  }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_go_csv(line, where, fields_);
    const std::string count =
        expected_found(std::to_string(columns_.size()) + " fields", std::to_string(fields_.size()));
    if (fields_.size() < columns_.size())
      fail_at(where, static_cast<std::int64_t>(line.size()) + 1, columns_[fields_.size()], count);
    if (fields_.size() > columns_.size())
      fail_at(where, fields_[columns_.size()].column, "", count);

    ParsedRow row;
    const Field& time = fields_[arrival_];
    time_text_ = quoted(time.text);
    const auto us = parse_int64(time.text);
    if (!us || *us < 0) {
      fail_at(where, time.column, columns_[arrival_],
              expected_found("a non-negative integer number of microseconds", time_text_));
    }
    row.time = Timestamp{*us / k_us_per_s, (*us % k_us_per_s) * k_ns_per_us};
    row.time_text = time_text_;
    row.time_column = time.column;
    row.input_tokens = prompt_tokens(where);
    row.output_tokens = parse_token_count(where, fields_[output_], columns_[output_]);
    return row;
  }

  // A count that may be 0 (a suffix wholly covered by its prefix; an unrecorded server count).
  std::int64_t count_at(const RowContext& where, std::size_t index) const {
    const Field& field = fields_[index];
    const auto value = parse_int64(field.text);
    if (!value || *value < 0 || *value > k_max_tokens) {
      fail_at(where, field.column, columns_[index],
              expected_found("an integer token count from 0 to " + std::to_string(k_max_tokens),
                             quoted(field.text)));
    }
    return *value;
  }

  std::int64_t prompt_tokens(const RowContext& where) const {
    const bool grouped = prefix_group_ && !fields_[*prefix_group_].text.empty();
    std::int64_t tokens = count_at(where, input_);
    std::size_t column = input_;
    if (grouped && prefix_length_) {
      tokens += count_at(where, *prefix_length_);
    } else if (!grouped && server_input_) {
      const std::int64_t server = count_at(where, *server_input_);
      if (server > 0) {
        tokens = server;
        column = *server_input_;
      }
    }
    return check_token_count(where, tokens, fields_[column].column, columns_[column]);
  }

  std::vector<std::string> columns_;
  std::vector<Field> fields_;
  std::size_t arrival_ = 0;
  std::size_t input_ = 0;
  std::size_t output_ = 0;
  std::optional<std::size_t> prefix_group_;
  std::optional<std::size_t> prefix_length_;
  std::optional<std::size_t> server_input_;
  std::string time_text_;
};

}  // namespace

std::string tracev2_required_columns() {
  return fmt::format("\"{}\", \"{}\", \"{}\" and \"{}\"", k_tracev2_id, k_tracev2_input,
                     k_tracev2_output, k_tracev2_arrival);
}

bool is_tracev2_header(std::string_view line) {
  const std::vector<std::string> columns = header_columns(line);
  return !columns.empty() && columns[0] == k_tracev2_id && find_column(columns, k_tracev2_input) &&
         find_column(columns, k_tracev2_output) && find_column(columns, k_tracev2_arrival);
}

std::unique_ptr<RequestSource> open_tracev2_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<TraceV2Source>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
