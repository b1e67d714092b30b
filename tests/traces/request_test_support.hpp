#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/request_trace.hpp"

namespace exitsim::traces::testing {

// A fresh directory per test for fixture files, removed afterwards.
class TraceDir {
 public:
  TraceDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("exitsim_" + std::string(info->test_suite_name()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TraceDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TraceDir(const TraceDir&) = delete;
  TraceDir& operator=(const TraceDir&) = delete;

  // Writes `content` byte for byte and returns the file's path.
  std::string write(const std::string& name, const std::string& content) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out << content;
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

struct ReadResult {
  std::vector<RequestDescriptor> requests;
  std::int64_t skipped = 0;
  bool has_arrivals = false;
  std::string format;
};

inline ReadResult read_all(const std::string& path, const RequestTraceOptions& options = {}) {
  ReadResult result;
  auto source = open_request_trace(path, options);
  result.has_arrivals = source->has_arrivals();
  result.format = source->format_name();
  while (auto request = source->next())
    result.requests.push_back(*request);
  result.skipped = source->skipped_rows();
  return result;
}

// The what() of the InputError that opening and draining `path` raises, or "no error".
inline std::string error_of(const std::string& path, const RequestTraceOptions& options = {}) {
  try {
    read_all(path, options);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

inline RequestDescriptor request(std::uint64_t id, std::optional<TimeNs> arrival,
                                 std::int64_t input, std::int64_t output) {
  return RequestDescriptor{RequestId{id}, arrival, input, output};
}

}  // namespace exitsim::traces::testing
