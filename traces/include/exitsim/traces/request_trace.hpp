#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/traces/request_source.hpp"

namespace exitsim::traces {

enum class RequestTraceFormat : std::uint8_t { azure, vidur, mooncake, burstgpt, native, sharegpt };

std::string_view to_string(RequestTraceFormat format);
std::optional<RequestTraceFormat> parse_request_trace_format(std::string_view name);
std::vector<std::string> request_trace_format_names();

struct RequestTraceOptions {
  std::optional<RequestTraceFormat> format;  // nullopt = detect from the header
  bool skip_bad_rows = false;                // count malformed rows instead of failing
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
