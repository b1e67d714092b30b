#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "exitsim/core/time.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

// The per-request CSV row and the integer TPOT shared by the collector's sketches and the CSV.
namespace exitsim::sim::metrics_detail {

inline constexpr std::string_view k_request_csv_header =
    "request_id,replica,arrival_ns,first_scheduled_ns,first_token_ns,completion_ns,input_tokens,"
    "output_tokens,preemptions,ttft_ms,tpot_ms,e2e_ms\n";

// (completion - first_token) / (output_tokens - 1) rounded half up to a nanosecond; nullopt for a
// one-token output, which has no TPOT.
std::optional<TimeNs> tpot_ns(const RequestRecord& request);

// Appends one CSV row ending in '\n'. Milliseconds are written exactly, as the integer nanoseconds
// with six decimals ("12.000500"); tpot_ms is empty for a one-token output.
void append_request_row(std::string& row, const RequestRecord& request);

}  // namespace exitsim::sim::metrics_detail
