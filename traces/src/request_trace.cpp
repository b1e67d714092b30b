#include "exitsim/traces/request_trace.hpp"

#include <array>
#include <optional>
#include <string>
#include <utility>

#include "exitsim/core/error.hpp"
#include "fields.hpp"
#include "line_reader.hpp"
#include "readers.hpp"

namespace exitsim::traces {
namespace {

constexpr std::array<std::pair<RequestTraceFormat, std::string_view>, 8> k_formats = {{
    {RequestTraceFormat::azure, "azure"},
    {RequestTraceFormat::vidur, "vidur"},
    {RequestTraceFormat::mooncake, "mooncake"},
    {RequestTraceFormat::burstgpt, "burstgpt"},
    {RequestTraceFormat::native, "native"},
    {RequestTraceFormat::tracev2, "tracev2"},
    {RequestTraceFormat::csv, "csv"},
    {RequestTraceFormat::sharegpt, "sharegpt"},
}};

// A generic CSV has no header of its own: it is read only when asked for, with a mapping.
bool is_detectable(RequestTraceFormat format) {
  return format != RequestTraceFormat::csv;
}

std::string any_header() {
  std::string names;
  for (const auto& [format, name] : k_formats) {
    if (!is_detectable(format))
      continue;
    if (!names.empty())
      names += ", ";
    names += name;
  }
  return "a request-trace header (one of " + names + ")";
}

std::optional<RequestTraceFormat> format_of_header(std::string_view line) {
  if (line.starts_with(k_native_magic))
    return RequestTraceFormat::native;
  const std::size_t first = line.find_first_not_of(" \t");
  if (first != std::string_view::npos && line[first] == '{')
    return RequestTraceFormat::mooncake;
  if (is_azure_header(line))
    return RequestTraceFormat::azure;
  if (is_vidur_header(line))
    return RequestTraceFormat::vidur;
  if (is_burstgpt_header(line))
    return RequestTraceFormat::burstgpt;
  if (is_tracev2_header(line))
    return RequestTraceFormat::tracev2;
  return std::nullopt;
}

// The head without a UTF-8 byte-order mark.
std::string_view without_bom(std::string_view head) {
  if (head.starts_with("\xEF\xBB\xBF"))
    head.remove_prefix(3);
  return head;
}

// Whether the file's first byte after a UTF-8 BOM and whitespace is '[' (a JSON array:
// ShareGPT's conversations; Mooncake's lines are objects).
bool starts_json_array(std::string_view head) {
  const std::string_view text = without_bom(head);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '[';
}

// A serving benchmark's result (or a server's request spans), not a trace: a JSON object whose
// head holds the keys each kind begins with (serving_benchmark.hpp names their sources). What it
// is and what to do with it, or nullopt. `whole`: the head is the whole file.
std::optional<std::string> benchmark_result_kind(std::string_view head, bool whole) {
  const std::string_view text = without_bom(head);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{')
    return std::nullopt;
  const auto has = [&](std::string_view key) { return text.find(key) != std::string_view::npos; };
  const std::string validate =
      ", not a request trace: compare the simulator with it by `exitsim validate SCENARIO "
      "--against FILE`";
  if (has("\"resourceSpans\"")) {
    return std::string("OpenTelemetry spans (OTLP JSON") +
           (has("\"gen_ai.latency.") ? ": a vLLM server's llm_request spans, each request's "
                                       "queue, prefill and decode times"
                                     : "") +
           "), not a request trace nor a benchmark result exitsim reads: compare the simulator "
           "with the benchmark run they were recorded under (its vLLM, SGLang, GuideLLM or AIPerf "
           "result) by `exitsim validate SCENARIO --against FILE`";
  }
  if (has("\"guidellm_version\"") || (has("\"benchmarks\"") && has("generative_benchmark")))
    return "a GuideLLM report (a run per benchmark; --run K picks one)" + validate;
  if (has("\"request_start_ns\"") && has("\"metrics\""))
    return "an AIPerf profile_export.jsonl (per-request records)" + validate;
  if (has("\"input_config\"") || has("\"time_to_first_token\": {"))
    return "an AIPerf summary (profile_export_aiperf.json: figures only, compared as such)" +
           validate;
  if (has("\"input_lens\""))
    return "a vLLM or SGLang serving-benchmark result (per-request lists)" + validate;
  for (const char* key :
       {"\"mean_ttft_ms\"", "\"burstiness\"", "\"server_info\"", "\"request_throughput\""}) {
    if (has(key)) {
      return whole ? "a summary-only vLLM or SGLang serving-benchmark result (figures, no "
                     "per-request lists: compared on its figures, its requests reconstructed)" +
                         validate
                   : "a vLLM or SGLang serving-benchmark result" + validate;
    }
  }
  return std::nullopt;
}

// The format the input's first line names (read from its head: no header is longer).
RequestTraceFormat detect_format(const TraceInput& input) {
  // ShareGPT files are often one line of hundreds of megabytes, longer than any line the line
  // reader takes: a JSON array is recognised by its first bytes.
  if (starts_json_array(input.head))
    return RequestTraceFormat::sharegpt;
  if (input.head.empty()) {
    throw InputError(SourceLocation{input.path, 1, 1, ""},
                     expected_found(any_header(), "an empty file"));
  }
  if (const std::optional<std::string> kind = benchmark_result_kind(input.head, input.at_end))
    throw InputError(SourceLocation{input.path, 1, 1, ""}, expected_found(any_header(), *kind));
  std::string_view first = without_bom(input.head);
  first = first.substr(0, first.find('\n'));
  if (first.ends_with('\r'))
    first.remove_suffix(1);
  const std::optional<RequestTraceFormat> format = format_of_header(first);
  if (!format) {
    throw InputError(SourceLocation{input.path, 1, 1, ""},
                     expected_found(any_header(), quoted_line(first)));
  }
  return *format;
}

}  // namespace

std::string_view to_string(RequestTraceFormat format) {
  for (const auto& [value, name] : k_formats) {
    if (value == format)
      return name;
  }
  return "unknown";
}

std::optional<RequestTraceFormat> parse_request_trace_format(std::string_view name) {
  for (const auto& [value, format_name] : k_formats) {
    if (format_name == name)
      return value;
  }
  return std::nullopt;
}

std::vector<std::string> request_trace_format_names() {
  std::vector<std::string> names;
  for (const auto& [format, name] : k_formats)
    names.emplace_back(name);
  return names;
}

RequestTraceFormat detect_request_trace_format(const std::string& path) {
  return detect_format(TraceInput::open(path));
}

std::unique_ptr<RequestSource> open_request_trace(const std::string& path,
                                                  const RequestTraceOptions& options) {
  // The ShareGPT reader opens the path itself (and names the format when it cannot).
  if (options.format == RequestTraceFormat::sharegpt)
    return open_sharegpt_trace(path, options.tokenizer, options.skip_bad_rows);
  // Opened once: detection reads the head, the reader continues the same stream.
  TraceInput input = TraceInput::open(path);
  const RequestTraceFormat format = options.format ? *options.format : detect_format(input);
  if (format == RequestTraceFormat::sharegpt)
    return open_sharegpt_trace(std::move(input), options.tokenizer, options.skip_bad_rows);
  switch (format) {
    case RequestTraceFormat::azure:
      return open_azure_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::vidur:
      return open_vidur_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::mooncake:
      return open_mooncake_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::burstgpt:
      return open_burstgpt_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::native:
      return open_native_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::tracev2:
      return open_tracev2_trace(std::move(input), options.skip_bad_rows);
    case RequestTraceFormat::csv:
      return open_csv_trace(std::move(input), options.skip_bad_rows, options.columns);
    case RequestTraceFormat::sharegpt:
      break;  // opened above
  }
  throw InputError(SourceLocation{path, 0, 0, ""}, "unknown request-trace format");
}

}  // namespace exitsim::traces
