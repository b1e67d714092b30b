#pragma once

// Request-trace helpers shared by the traces, sim and analysis suites.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/request.hpp"
#include "exitsim/traces/request_source.hpp"
#include "exitsim/traces/request_trace.hpp"
#include "support/test_files.hpp"

namespace exitsim::test_support {

inline RequestDescriptor request(std::uint64_t id, std::optional<TimeNs> arrival,
                                 std::int64_t input, std::int64_t output) {
  return RequestDescriptor{RequestId{id}, arrival, input, output};
}

// What a VectorSource reports besides its requests.
struct VectorSourceReport {
  std::int64_t skipped_rows = 0;
  // Unset: whether the first request has an arrival (true for an empty list).
  std::optional<bool> has_arrivals;
  std::string format = "vector";
};

// Replays a fixed list of requests.
class VectorSource final : public traces::RequestSource {
 public:
  explicit VectorSource(std::vector<RequestDescriptor> requests, VectorSourceReport report = {})
      : requests_(std::move(requests)), report_(std::move(report)) {}
  std::optional<RequestDescriptor> next() override {
    if (next_ == requests_.size())
      return std::nullopt;
    return requests_[next_++];
  }
  std::int64_t skipped_rows() const override { return report_.skipped_rows; }
  bool has_arrivals() const override {
    return report_.has_arrivals.value_or(requests_.empty() || requests_[0].arrival.has_value());
  }
  std::string format_name() const override { return report_.format; }

 private:
  std::vector<RequestDescriptor> requests_;
  VectorSourceReport report_;
  std::size_t next_ = 0;
};

struct ReadResult {
  std::vector<RequestDescriptor> requests;
  std::int64_t skipped = 0;
  bool has_arrivals = false;
  std::string format;
};

// Opens and drains the request trace at `path`.
inline ReadResult read_all(const std::string& path,
                           const traces::RequestTraceOptions& options = {}) {
  ReadResult result;
  auto source = traces::open_request_trace(path, options);
  result.has_arrivals = source->has_arrivals();
  result.format = source->format_name();
  while (auto request = source->next())
    result.requests.push_back(*request);
  result.skipped = source->skipped_rows();
  return result;
}

// The what() of the InputError that opening and draining `path` raises, or k_no_error.
inline std::string error_of(const std::string& path,
                            const traces::RequestTraceOptions& options = {}) {
  return error_of([&] { read_all(path, options); });
}

}  // namespace exitsim::test_support
