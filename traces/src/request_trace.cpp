#include "exitsim/traces/request_trace.hpp"

#include <array>
#include <fstream>
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

// Whether the file's first byte after a UTF-8 BOM and whitespace is '[' (a JSON array:
// ShareGPT's conversations; Mooncake's lines are objects). False when it cannot be read: the
// line reader then reports why.
bool starts_json_array(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4096> head{};
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::string_view text(head.data(), static_cast<std::size_t>(in.gcount()));
  if (text.starts_with("\xEF\xBB\xBF"))
    text.remove_prefix(3);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '[';
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
  // ShareGPT files are often one line of hundreds of megabytes, longer than any line the line
  // reader takes: a JSON array is recognised by its first bytes.
  if (starts_json_array(path))
    return RequestTraceFormat::sharegpt;
  LineReader lines(path);
  std::string_view first;
  if (!lines.next(first)) {
    throw InputError(SourceLocation{path, 1, 1, ""}, expected_found(any_header(), "an empty file"));
  }
  const std::optional<RequestTraceFormat> format = format_of_header(first);
  if (!format) {
    throw InputError(SourceLocation{path, 1, 1, ""},
                     expected_found(any_header(), quoted_line(first)));
  }
  return *format;
}

std::unique_ptr<RequestSource> open_request_trace(const std::string& path,
                                                  const RequestTraceOptions& options) {
  const RequestTraceFormat format =
      options.format ? *options.format : detect_request_trace_format(path);
  switch (format) {
    case RequestTraceFormat::azure:
      return open_azure_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::vidur:
      return open_vidur_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::mooncake:
      return open_mooncake_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::burstgpt:
      return open_burstgpt_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::native:
      return open_native_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::tracev2:
      return open_tracev2_trace(path, options.skip_bad_rows);
    case RequestTraceFormat::csv:
      return open_csv_trace(path, options.skip_bad_rows, options.columns);
    case RequestTraceFormat::sharegpt:
      return open_sharegpt_trace(path, options.tokenizer, options.skip_bad_rows);
  }
  throw InputError(SourceLocation{path, 0, 0, ""}, "unknown request-trace format");
}

}  // namespace exitsim::traces
