#include "metrics/request_rows.hpp"

#include <fmt/format.h>

#include <iterator>

namespace exitsim::sim::metrics_detail {
namespace {

void append_ms(std::string& row, TimeNs ns) {
  fmt::format_to(std::back_inserter(row), "{}.{:06}", ns / k_ns_per_ms, ns % k_ns_per_ms);
}

}  // namespace

std::optional<TimeNs> tpot_ns(const RequestRecord& request) {
  if (request.output_tokens <= 1)
    return std::nullopt;
  const TimeNs decode = request.completion - request.first_token;
  const std::int64_t gaps = request.output_tokens - 1;
  const TimeNs remainder = decode % gaps;
  // remainder >= gaps - remainder is 2 * remainder >= gaps without the overflow.
  return decode / gaps + (remainder >= gaps - remainder ? 1 : 0);
}

void append_request_row(std::string& row, const RequestRecord& r) {
  fmt::format_to(std::back_inserter(row), "{},{},{},{},{},{},{},{},{},", r.id.value, r.replica,
                 r.arrival, r.first_scheduled, r.first_token, r.completion, r.input_tokens,
                 r.output_tokens, r.preemptions);
  append_ms(row, r.first_token - r.arrival);
  row += ',';
  if (const std::optional<TimeNs> tpot = tpot_ns(r))
    append_ms(row, *tpot);
  row += ',';
  append_ms(row, r.completion - r.arrival);
  row += '\n';
}

}  // namespace exitsim::sim::metrics_detail
