#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/request_trace_writer.hpp"
#include "fields.hpp"
#include "readers.hpp"

namespace exitsim::traces {
namespace {

std::string errno_text() {
  return errno != 0 ? std::strerror(errno) : "the file system reported an error";
}

}  // namespace

NativeRequestTraceWriter::NativeRequestTraceWriter(std::string path)
    : path_(std::move(path)), temp_path_(path_ + ".tmp") {
  errno = 0;
  out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_.is_open()) {
    throw InputError(SourceLocation{temp_path_, 0, 0, ""},
                     "cannot write request trace: " + errno_text());
  }
  out_ << k_native_version_line << '\n' << k_native_header << '\n';
}

NativeRequestTraceWriter::~NativeRequestTraceWriter() {
  if (committed_)
    return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temp_path_, ignored);
}

void NativeRequestTraceWriter::fail(const std::string& field, const std::string& message) const {
  throw InputError(SourceLocation{path_, 0, 0, field}, message);
}

void NativeRequestTraceWriter::write(const RequestDescriptor& request) {
  if (last_id_ && request.id.value <= *last_id_) {
    fail("request_id", expected_found("a request id above " + std::to_string(*last_id_),
                                      std::to_string(request.id.value)));
  }
  if (arrivals_ && *arrivals_ != request.arrival.has_value()) {
    fail("arrival_ns", expected_found(*arrivals_ ? "an arrival time, like the first request"
                                                 : "no arrival time, like the first request",
                                      request.arrival ? std::to_string(*request.arrival) : "none"));
  }
  if (request.arrival &&
      (*request.arrival < 0 || (last_arrival_ && *request.arrival < *last_arrival_))) {
    fail("arrival_ns", expected_found("a non-negative arrival at or after " +
                                          std::to_string(last_arrival_.value_or(0)),
                                      std::to_string(*request.arrival)));
  }
  const auto check_tokens = [this](std::int64_t tokens, const char* field) {
    if (tokens < 1 || tokens > k_max_tokens) {
      fail(field, expected_found("a token count from 1 to " + std::to_string(k_max_tokens),
                                 std::to_string(tokens)));
    }
  };
  check_tokens(request.input_tokens, "input_tokens");
  check_tokens(request.output_tokens, "output_tokens");

  line_.clear();
  if (request.arrival) {
    fmt::format_to(std::back_inserter(line_), "{},{},{},{}\n", request.id.value, *request.arrival,
                   request.input_tokens, request.output_tokens);
  } else {
    fmt::format_to(std::back_inserter(line_), "{},,{},{}\n", request.id.value, request.input_tokens,
                   request.output_tokens);
  }
  out_.write(line_.data(), static_cast<std::streamsize>(line_.size()));
  if (!out_) {
    throw InputError(SourceLocation{temp_path_, 0, 0, ""},
                     "cannot write request trace: " + errno_text());
  }
  arrivals_ = request.arrival.has_value();
  last_id_ = request.id.value;
  last_arrival_ = request.arrival;
  ++written_;
}

void NativeRequestTraceWriter::commit() {
  if (written_ == 0)
    fail("", expected_found("at least one request", "none"));
  errno = 0;
  out_.flush();
  out_.close();
  if (out_.fail()) {
    throw InputError(SourceLocation{temp_path_, 0, 0, ""},
                     "cannot write request trace: " + errno_text());
  }
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) {
    throw InputError(SourceLocation{path_, 0, 0, ""},
                     "cannot write request trace: " + ec.message());
  }
  committed_ = true;
}

std::int64_t write_native_request_trace(RequestSource& source, const std::string& path) {
  NativeRequestTraceWriter writer(path);
  while (const std::optional<RequestDescriptor> request = source.next())
    writer.write(*request);
  writer.commit();
  return writer.written();
}

}  // namespace exitsim::traces
