#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <system_error>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/request_trace_writer.hpp"
#include "fields.hpp"
#include "readers.hpp"
#include "trace_io.hpp"

namespace exitsim::traces {
namespace {

using detail::AtomicOutputFile;

// "<path>.tmp: cannot write request trace: <reason>", or "<path>: ..." when the rename fails.
InputError request_trace_io_error(const AtomicOutputFile& file, AtomicOutputFile::Step step,
                                  std::error_code reason) {
  const std::string& where =
      step == AtomicOutputFile::Step::rename ? file.path() : file.temp_path();
  const std::string text = reason ? reason.message() : "the file system reported an error";
  return InputError(SourceLocation{where, 0, 0, ""}, "cannot write request trace: " + text);
}

}  // namespace

NativeRequestTraceWriter::NativeRequestTraceWriter(std::string path, bool prefix_columns)
    : path_(std::move(path)),
      file_(std::make_unique<AtomicOutputFile>(path_, request_trace_io_error)),
      prefix_columns_(prefix_columns) {}

NativeRequestTraceWriter::~NativeRequestTraceWriter() = default;

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
  const bool prefix = !request.prefix_hashes.empty();
  if (prefix && (request.prefix_block_tokens < 1 ||
                 request.prefix_block_tokens > k_max_prefix_block_tokens)) {
    fail("prefix_block_tokens",
         expected_found(fmt::format("a block size from 1 to {} tokens for the prefix hashes",
                                    k_max_prefix_block_tokens),
                        std::to_string(request.prefix_block_tokens)));
  }
  if (written_ == 0) {
    prefix_columns_ = prefix_columns_ || prefix;
    file_->write(fmt::format("{}\n{}\n", k_native_version_line,
                             prefix_columns_ ? k_native_header_with_prefix : k_native_header));
  } else if (prefix && !prefix_columns_) {
    fail("prefix_hashes",
         expected_found("no prefix hashes, like the first request (its file has no such column)",
                        fmt::format("{} hashes", request.prefix_hashes.size())));
  }

  line_.clear();
  if (request.arrival) {
    fmt::format_to(std::back_inserter(line_), "{},{},{},{}", request.id.value, *request.arrival,
                   request.input_tokens, request.output_tokens);
  } else {
    fmt::format_to(std::back_inserter(line_), "{},,{},{}", request.id.value, request.input_tokens,
                   request.output_tokens);
  }
  if (prefix_columns_) {
    if (prefix) {
      fmt::format_to(std::back_inserter(line_), ",{},{}", request.prefix_block_tokens,
                     fmt::join(request.prefix_hashes, " "));
    } else {
      line_ += ",,";
    }
  }
  line_ += '\n';
  file_->write(line_);
  arrivals_ = request.arrival.has_value();
  last_id_ = request.id.value;
  last_arrival_ = request.arrival;
  ++written_;
}

void NativeRequestTraceWriter::commit() {
  if (written_ == 0)
    fail("", expected_found("at least one request", "none"));
  file_->finish();
}

std::int64_t write_native_request_trace(RequestSource& source, const std::string& path) {
  NativeRequestTraceWriter writer(path, source.may_carry_prefix_hashes());
  while (const std::optional<RequestDescriptor> request = source.next())
    writer.write(*request);
  writer.commit();
  return writer.written();
}

}  // namespace exitsim::traces
