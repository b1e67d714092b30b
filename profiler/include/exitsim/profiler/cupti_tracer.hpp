#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "exitsim/traces/op_trace.hpp"

namespace exitsim::profiler {

struct CuptiTracerOptions {
  std::size_t buffer_bytes = std::size_t{8} << 20;  // per CUPTI activity buffer
  bool kernels = true;                              // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  bool memcpy = true;                               // CUPTI_ACTIVITY_KIND_MEMCPY
  bool runtime = true;  // CUPTI_ACTIVITY_KIND_RUNTIME (the host side of each launch)
  // Times are reported relative to this instant; pass HostProfiler::origin() so that host spans
  // and GPU records share one clock (CUPTI is asked to timestamp with steady_clock). Defaults to
  // the tracer's construction.
  std::optional<std::chrono::steady_clock::time_point> origin;
};

// Collects CUPTI activity records (kernels, memcpys, runtime API calls) as op-trace rows:
// kernels on device "cuda:<id>" and their CUDA stream, runtime calls on device "cpu" with the
// calling thread's index (in order of first appearance) as the stream, and CUPTI's correlation id
// linking each launch to its kernel. CUPTI's activity API is process-global, so only one tracer
// may exist at a time. Failures are exitsim::InputError with field "cupti".
class CuptiTracer {
 public:
  explicit CuptiTracer(CuptiTracerOptions options = {});
  // Flushes and disables collection; records not yet taken are discarded.
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Makes CUPTI hand over every buffered record, including those of running work.
  void flush();
  // Flushes, then moves out the rows gathered so far (in CUPTI's delivery order).
  std::vector<traces::OpTraceRow> take_rows();
  // take_rows() into `out`; returns the number of rows written.
  std::int64_t write(traces::OpTraceWriter& out);
  // Records CUPTI dropped because its buffers were full (raise buffer_bytes when non-zero).
  std::uint64_t dropped_records() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace exitsim::profiler
