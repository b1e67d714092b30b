#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/traces/request_source.hpp"

namespace exitsim::traces {

enum class RequestTraceFormat : std::uint8_t {
  azure,
  vidur,
  mooncake,
  burstgpt,
  native,
  tracev2,   // BLIS (inference-sim) TraceV2 data CSV
  csv,       // generic, through RequestTraceOptions::columns
  sharegpt,  // conversations as text, through RequestTraceOptions::tokenizer
};

std::string_view to_string(RequestTraceFormat format);
std::optional<RequestTraceFormat> parse_request_trace_format(std::string_view name);
std::vector<std::string> request_trace_format_names();

// Which header columns of a generic CSV (format csv, never detected) hold what.
struct CsvColumnMapping {
  std::string arrival;             // "" = the rows carry no arrival times
  std::string input_tokens;        // required
  std::string output_tokens;       // required
  std::string arrival_unit = "s";  // s | ms | us | ns (decimal numbers) | datetime
  // Names the mapping's keys in messages: "<key_prefix>.input_tokens".
  std::string key_prefix = "workload.trace.columns";
};

// The units csv_column_mapping.arrival_unit accepts.
std::vector<std::string> csv_arrival_unit_names();

struct RequestTraceOptions {
  std::optional<RequestTraceFormat> format;  // nullopt = detect from the header
  bool skip_bad_rows = false;                // count malformed rows instead of failing
  CsvColumnMapping columns{};                // format csv only
  // A Hugging Face tokenizer.json: ShareGPT traces hold text, counted in its tokens.
  std::string tokenizer{};
};

// Opens a request trace for streaming. Throws InputError naming the file when it is missing,
// unreadable, or its format cannot be detected.
std::unique_ptr<RequestSource> open_request_trace(const std::string& path,
                                                  const RequestTraceOptions& options = {});

// The format a file's header announces; throws InputError when it matches none.
RequestTraceFormat detect_request_trace_format(const std::string& path);

}  // namespace exitsim::traces
