#pragma once

#include <cstdint>
#include <string>

#include "exitsim/traces/request_source.hpp"

namespace exitsim::traces {

// What writing a TraceV2 pair did beyond copying requests, for the caller to say.
struct TraceV2WriteReport {
  std::int64_t written = 0;
  std::string header_path;
  // Arrivals that were not whole microseconds (TraceV2's unit), rounded to the nearest one.
  std::int64_t arrivals_rounded = 0;
  // Requests whose prefix-block hashes (Mooncake's hash_ids) TraceV2 has no column for.
  std::int64_t prefix_hashes_dropped = 0;
};

// The YAML header's path for a TraceV2 data file: its extension replaced by ".yaml"
// ("trace.csv" -> "trace.yaml").
std::string tracev2_header_path(const std::string& data_path);

// Drains `source` into a BLIS (inference-sim) TraceV2 pair (docs/traces.md): the data CSV at
// `data_path` and the YAML header at tracev2_header_path(data_path). Each is written to a
// temporary file renamed into place only when complete. Throws InputError when the requests
// have no arrival times (TraceV2 rows need them), when the two paths coincide, or on I/O errors.
TraceV2WriteReport write_tracev2_request_trace(RequestSource& source, const std::string& data_path);

}  // namespace exitsim::traces
