#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/traces/request_trace.hpp"
#include "fields.hpp"
#include "line_reader.hpp"

namespace exitsim::traces {

// What a format parser extracts from one line, before the checks that span rows.
struct ParsedRow {
  std::optional<Timestamp> time;
  // How the time appears in messages (already quoted where the format quotes) and where.
  std::string_view time_text;
  std::int64_t time_column = 0;
  std::optional<std::uint64_t> id;  // only formats that carry ids
  std::int64_t id_column = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::vector<std::uint64_t> prefix_hashes;  // RequestDescriptor::prefix_hashes
  std::int64_t prefix_block_tokens = 0;
};

// Whether rows carry arrival times: fixed by the format, or by the first row (native).
enum class ArrivalPresence : std::uint8_t { always, never, as_first_row };

// Shared machinery for all readers: pulls lines, skips blank ones, hands each to the format's
// parser, and applies what needs state across rows (arrival order and rebasing, id order,
// skip counting, the at-least-one-request rule). Parsers stay per-line and stateless, so a
// rejected row never leaves half-updated state behind.
class RowSource : public RequestSource {
 public:
  std::optional<RequestDescriptor> next() final;
  std::int64_t skipped_rows() const final { return skipped_; }
  bool has_arrivals() const final { return arrivals_.value_or(false); }
  std::string format_name() const final { return std::string(to_string(format_)); }

 protected:
  struct Naming {
    std::string time_field;  // column or key holding the time
    std::string id_field;    // column holding request ids, if any
  };

  RowSource(TraceInput input, RequestTraceFormat format, bool skip_bad_rows,
            ArrivalPresence presence, Naming naming);

  // Parses one non-blank data line. nullopt marks a row the format itself says is not a request
  // (BurstGPT's failed requests); it is counted in skipped_rows().
  virtual std::optional<ParsedRow> parse(std::string_view line, const RowContext& where) = 0;

  // Reads one header line; throws "expected <what>, found an empty file|the end of the file".
  std::string_view read_header(const std::string& what);
  // For formats whose header says whether rows carry times (Vidur with or without arrived_at):
  // opened with ArrivalPresence::as_first_row, then fixed here once the header is read.
  void set_arrivals_present(bool present) { arrivals_ = present; }
  // Reads the first request ahead, so that has_arrivals() is known before the first next().
  void read_ahead();

  const std::string& path() const { return lines_.path(); }
  RowContext context() const { return RowContext{lines_.path(), lines_.line_number()}; }

  // Splits a CSV line and checks it has exactly `columns.size()` fields.
  void split_row(std::string_view line, const RowContext& where,
                 const std::vector<std::string>& columns);
  const std::vector<Field>& fields() const { return fields_; }

 private:
  std::optional<RequestDescriptor> read_one();
  RequestDescriptor accept(const ParsedRow& row, const RowContext& where);

  LineReader lines_;
  RequestTraceFormat format_;
  bool skip_bad_rows_;
  std::optional<bool> arrivals_;
  Naming naming_;
  std::vector<Field> fields_;
  std::optional<RequestDescriptor> ahead_;

  std::int64_t accepted_ = 0;
  std::int64_t skipped_ = 0;
  std::optional<Timestamp> first_time_;
  std::optional<Timestamp> last_time_;
  std::string last_time_text_;
  std::optional<std::uint64_t> last_id_;
};

}  // namespace exitsim::traces
