#include "row_source.hpp"

#include <optional>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/core/time.hpp"

namespace exitsim::traces {
namespace {

constexpr std::int64_t k_ns_per_s = 1'000'000'000;

// Arrivals are int64 nanoseconds relative to the first request, and a trace spans at most
// k_max_arrival_ns (2^62 ns, about 146 years: the rest of the clock is the run's); the Mooncake
// maximum of 4611686018427 ms is just inside.
std::optional<std::int64_t> span_ns(const Timestamp& first, const Timestamp& time) {
  std::int64_t seconds = 0;
  std::int64_t seconds_ns = 0;
  std::int64_t span = 0;
  if (__builtin_sub_overflow(time.seconds, first.seconds, &seconds) ||
      __builtin_mul_overflow(seconds, k_ns_per_s, &seconds_ns) ||
      __builtin_add_overflow(seconds_ns, time.nanos - first.nanos, &span) ||
      span > k_max_arrival_ns) {
    return std::nullopt;
  }
  return span;
}

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

}  // namespace

RowSource::RowSource(TraceInput input, RequestTraceFormat format, bool skip_bad_rows,
                     ArrivalPresence presence, Naming naming)
    : lines_(std::move(input)),
      format_(format),
      skip_bad_rows_(skip_bad_rows),
      naming_(std::move(naming)) {
  if (presence == ArrivalPresence::always)
    arrivals_ = true;
  if (presence == ArrivalPresence::never)
    arrivals_ = false;
}

std::string_view RowSource::read_header(const std::string& what) {
  std::string_view line;
  if (!lines_.next(line)) {
    const std::int64_t line_number = lines_.line_number() + 1;
    throw InputError(
        SourceLocation{path(), line_number, 1, ""},
        expected_found(what, line_number == 1 ? "an empty file" : "the end of the file"));
  }
  return line;
}

void RowSource::read_ahead() {
  ahead_ = read_one();
}

void RowSource::split_row(std::string_view line, const RowContext& where,
                          const std::vector<std::string>& columns) {
  split_csv(line, fields_);
  const std::string message =
      expected_found(std::to_string(columns.size()) + " fields", std::to_string(fields_.size()));
  if (fields_.size() < columns.size()) {
    fail_at(where, static_cast<std::int64_t>(line.size()) + 1, columns[fields_.size()], message);
  }
  if (fields_.size() > columns.size())
    fail_at(where, fields_[columns.size()].column, "", message);
}

std::optional<RequestDescriptor> RowSource::next() {
  if (ahead_) {
    std::optional<RequestDescriptor> request = std::move(ahead_);
    ahead_.reset();
    return request;
  }
  std::optional<RequestDescriptor> request = read_one();
  if (!request && accepted_ == 0) {
    const std::string found =
        skipped_ == 0 ? "none" : "none (" + std::to_string(skipped_) + " rows skipped)";
    throw InputError(SourceLocation{path(), 0, 0, ""},
                     expected_found("at least one request", found));
  }
  return request;
}

std::optional<RequestDescriptor> RowSource::read_one() {
  std::string_view line;
  while (lines_.next(line)) {
    if (is_blank_line(line))
      continue;
    const RowContext where = context();
    try {
      const std::optional<ParsedRow> row = parse(line, where);
      if (!row) {
        ++skipped_;
        continue;
      }
      return accept(*row, where);
    } catch (const InputError&) {
      if (!skip_bad_rows_)
        throw;
      ++skipped_;
    }
  }
  return std::nullopt;
}

RequestDescriptor RowSource::accept(const ParsedRow& row, const RowContext& where) {
  if (!arrivals_)
    arrivals_ = row.time.has_value();
  if (*arrivals_ && !row.time) {
    fail_at(where, row.time_column, naming_.time_field,
            expected_found("an arrival time (the first request has one)", "an empty field"));
  }
  if (!*arrivals_ && row.time) {
    fail_at(where, row.time_column, naming_.time_field,
            expected_found("an empty field (the first request has no arrival time)",
                           std::string(row.time_text)));
  }

  RequestDescriptor request;
  if (row.time) {
    if (last_time_ && *row.time < *last_time_) {
      fail_at(where, row.time_column, naming_.time_field,
              expected_found("a time at or after the previous request's " + last_time_text_,
                             std::string(row.time_text)));
    }
    const Timestamp first = first_time_.value_or(*row.time);
    const std::optional<std::int64_t> arrival = span_ns(first, *row.time);
    if (!arrival) {
      fail_at(where, row.time_column, naming_.time_field,
              expected_found("a time within 2^62 ns (about 146 years) of the first request's",
                             std::string(row.time_text)));
    }
    request.arrival = *arrival;
  }

  std::uint64_t id = static_cast<std::uint64_t>(accepted_);
  if (row.id) {
    if (last_id_ && *row.id <= *last_id_) {
      fail_at(
          where, row.id_column, naming_.id_field,
          expected_found("a request id above the previous request's " + std::to_string(*last_id_),
                         std::to_string(*row.id)));
    }
    id = *row.id;
  }
  request.id = RequestId{id};
  request.input_tokens = row.input_tokens;
  request.output_tokens = row.output_tokens;
  request.prefix_hashes = std::move(row.prefix_hashes);
  request.prefix_block_tokens = row.prefix_block_tokens;

  // Commit cross-row state only once every check has passed, so a skipped row leaves no trace.
  if (row.time) {
    if (!first_time_)
      first_time_ = row.time;
    last_time_ = row.time;
    last_time_text_.assign(row.time_text);
  }
  if (row.id)
    last_id_ = row.id;
  ++accepted_;
  return request;
}

}  // namespace exitsim::traces
