// exitsim's own request-trace format (docs/traces.md): a version line, then
// request_id,arrival_ns,input_tokens,output_tokens[,prefix_block_tokens,prefix_hashes]. Arrivals
// may be empty in every row.
#include <fmt/format.h>

#include "exitsim/core/error.hpp"
#include "readers.hpp"
#include "row_source.hpp"

namespace exitsim::traces {
namespace {

constexpr std::int64_t k_ns_per_s = 1'000'000'000;

std::string trimmed(std::string_view text) {
  const std::size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(0, end == std::string_view::npos ? 0 : end + 1));
}

class NativeSource final : public RowSource {
 public:
  NativeSource(TraceInput input, bool skip_bad_rows)
      : RowSource(std::move(input), RequestTraceFormat::native, skip_bad_rows,
                  ArrivalPresence::as_first_row, Naming{"arrival_ns", "request_id"}) {
    const std::string& path = this->path();
    const std::string version_line = "\"" + std::string(k_native_version_line) + "\"";
    const std::string magic = trimmed(read_header(version_line));
    if (magic != k_native_version_line) {
      throw InputError(SourceLocation{path, 1, 1, ""},
                       expected_found(version_line, quoted_line(magic)));
    }
    const std::string expected = "the native header \"" + std::string(k_native_header) +
                                 "\" or \"" + std::string(k_native_header_with_prefix) + "\"";
    const std::string header = trimmed(read_header(expected));
    if (header == k_native_header_with_prefix) {
      prefix_columns_ = true;
      columns_.insert(columns_.end(), {"prefix_block_tokens", "prefix_hashes"});
    } else if (header != k_native_header) {
      throw InputError(SourceLocation{path, 2, 1, ""},
                       expected_found(expected, quoted_line(header)));
    }
    read_ahead();
  }

  bool may_carry_prefix_hashes() const override { return prefix_columns_; }

 private:
  std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) override {
    split_row(line, where, columns_);
    const Field& id = fields()[0];
    const Field& arrival = fields()[1];
    ParsedRow row;
    row.id = parse_uint64(id.text);
    if (!row.id) {
      fail_at(where, id.column, columns_[0],
              expected_found("a non-negative integer request id", quoted(id.text)));
    }
    row.id_column = id.column;
    row.time_column = arrival.column;
    if (!arrival.text.empty()) {
      const std::optional<std::int64_t> ns = parse_int64(arrival.text);
      time_text_ = quoted(arrival.text);
      if (!ns || *ns < 0) {
        fail_at(where, arrival.column, columns_[1],
                expected_found("a non-negative integer number of nanoseconds", time_text_));
      }
      row.time = Timestamp{*ns / k_ns_per_s, *ns % k_ns_per_s};
      row.time_text = time_text_;
    }
    row.input_tokens = parse_token_count(where, fields()[2], columns_[2]);
    row.output_tokens = parse_token_count(where, fields()[3], columns_[3]);
    if (columns_.size() > 4)
      parse_prefix(where, row);
    return row;
  }

  // prefix_block_tokens and prefix_hashes: both empty, or a block size and at least one hash.
  void parse_prefix(const RowContext& where, ParsedRow& row) const {
    const Field& size = fields()[4];
    const Field& hashes = fields()[5];
    if (size.text.empty() && hashes.text.empty())
      return;
    const std::optional<std::int64_t> tokens = parse_int64(size.text);
    if (!tokens || *tokens < 1 || *tokens > k_max_prefix_block_tokens) {
      fail_at(where, size.column, columns_[4],
              expected_found(fmt::format("a block size from 1 to {} tokens for the hashes",
                                         k_max_prefix_block_tokens),
                             quoted(size.text)));
    }
    std::string_view rest = hashes.text;
    while (!rest.empty()) {
      const std::size_t end = rest.find(' ');
      const std::string_view item = rest.substr(0, end);
      const std::optional<std::uint64_t> hash = parse_uint64(item);
      if (!hash) {
        fail_at(where, hashes.column, columns_[5],
                expected_found("non-negative integer hashes separated by single spaces",
                               quoted(hashes.text)));
      }
      row.prefix_hashes.push_back(*hash);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (end != std::string_view::npos && rest.empty()) {
        fail_at(where, hashes.column, columns_[5],
                expected_found("non-negative integer hashes separated by single spaces",
                               quoted(hashes.text)));
      }
    }
    if (row.prefix_hashes.empty()) {
      fail_at(where, hashes.column, columns_[5],
              expected_found("at least one hash with a prefix_block_tokens", "none"));
    }
    row.prefix_block_tokens = *tokens;
  }

  std::vector<std::string> columns_ = {"request_id", "arrival_ns", "input_tokens", "output_tokens"};
  std::string time_text_;
  bool prefix_columns_ = false;
};

}  // namespace

std::unique_ptr<RequestSource> open_native_trace(TraceInput input, bool skip_bad_rows) {
  return std::make_unique<NativeSource>(std::move(input), skip_bad_rows);
}

}  // namespace exitsim::traces
