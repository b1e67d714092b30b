#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::profiler {

// The calibration features of one op; see OpTraceRow for their meaning.
struct SpanShape {
  std::int64_t batch_tokens = 0;
  std::int64_t context_tokens = 0;
  int depth = -1;
  int recursion = 0;
  std::uint64_t step_id = 0;
};

struct HostProfilerOptions {
  bool enabled = true;
  // Spans reserved up front so that recording does not allocate; more are still kept (the
  // storage grows) rather than dropped.
  std::size_t capacity = 1 << 16;
  std::string device = "cpu";
  int stream = 0;  // the thread index, when each thread has its own profiler
  // Lets a trace that merges this profiler with CUPTI records keep the two id ranges apart.
  std::uint64_t first_correlation_id = 1;
};

// Records host-side spans as op-trace rows: steady_clock nanoseconds since the profiler was
// created. One profiler belongs to one thread (no locking on the recording path). A disabled
// profiler costs one branch per span.
class HostProfiler {
 public:
  class Span;

  explicit HostProfiler(HostProfilerOptions options = {});

  // Starts a span that ends when the returned object is destroyed (or end() is called). Spans
  // nest: an inner span ends before the outer one. `name` is copied once per distinct name.
  [[nodiscard]] Span span(std::string_view name, traces::OpKind kind, SpanShape shape = {});

  bool enabled() const { return options_.enabled; }
  std::size_t size() const { return records_.size(); }
  // Now, on this profiler's clock.
  TimeNs now() const { return since_origin(std::chrono::steady_clock::now()); }
  std::chrono::steady_clock::time_point origin() const { return origin_; }

  // The recorded spans as rows, in start order; a span still open has duration 0.
  std::vector<traces::OpTraceRow> rows() const;
  void write(traces::OpTraceWriter& out) const;
  // Forgets the spans (keeping the storage and the clock origin); ids continue to increase.
  void clear() { records_.clear(); }

 private:
  struct Record {
    std::uint32_t name = 0;
    traces::OpKind kind = traces::OpKind::other;
    TimeNs start = 0;
    TimeNs end = -1;
    SpanShape shape;
    std::uint64_t correlation_id = 0;
  };

  TimeNs since_origin(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }
  std::uint32_t intern(std::string_view name);
  traces::OpTraceRow row_of(const Record& record) const;

  HostProfilerOptions options_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Record> records_;
  // A deque never moves its elements, so the map's views into them stay valid (a vector would
  // move short strings, whose characters live inside the std::string object).
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, std::uint32_t> name_ids_;
  std::uint64_t next_correlation_id_;
};

class HostProfiler::Span {
 public:
  Span() = default;
  Span(Span&& other) noexcept : profiler_(other.profiler_), index_(other.index_) {
    other.profiler_ = nullptr;
  }
  Span& operator=(Span&& other) noexcept {
    if (this != &other) {
      end();
      profiler_ = other.profiler_;
      index_ = other.index_;
      other.profiler_ = nullptr;
    }
    return *this;
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() { end(); }

  // Ends the span now; later calls do nothing.
  void end() {
    if (profiler_ == nullptr)
      return;
    profiler_->records_[index_].end = profiler_->now();
    profiler_ = nullptr;
  }
  // The span's correlation id (0 for a disabled profiler), to tag work it launches.
  std::uint64_t correlation_id() const {
    return profiler_ == nullptr ? 0 : profiler_->records_[index_].correlation_id;
  }

 private:
  friend class HostProfiler;
  Span(HostProfiler* profiler, std::size_t index) : profiler_(profiler), index_(index) {}

  HostProfiler* profiler_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace exitsim::profiler
