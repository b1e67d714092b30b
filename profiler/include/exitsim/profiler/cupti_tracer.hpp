#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "exitsim/profiler/activity_join.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::profiler {

struct CuptiTracerOptions {
  std::size_t buffer_bytes = std::size_t{8} << 20;  // per CUPTI activity buffer
  bool kernels = true;                              // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  bool memcpy = true;                               // CUPTI_ACTIVITY_KIND_MEMCPY
  bool memset = true;                               // CUPTI_ACTIVITY_KIND_MEMSET
  bool runtime = true;          // CUPTI_ACTIVITY_KIND_RUNTIME (the host side of each launch)
  bool synchronization = true;  // CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (host waits)
  // Times are reported relative to this instant; pass HostProfiler::origin() so that host spans
  // and GPU records share one clock (CUPTI is asked to timestamp with steady_clock). Defaults to
  // the tracer's construction.
  std::optional<std::chrono::steady_clock::time_point> origin;
};

// Collects CUPTI activity records (concurrent kernels, memcpys, memsets, runtime API calls,
// synchronization waits and external correlations) and joins them (ActivityJoin) into op-trace
// rows: kernels on device "cuda:<id>" and their CUDA stream, runtime calls and waits on device
// "cpu" with the calling thread's index as the stream, CUPTI's correlation id linking each launch
// to its work, and one row per engine op named as the engine names it, so calibration reads a
// GPU trace exactly as a CPU one. The engine labels its ops with push_op()/pop_op() (or an
// OpScope) around their launches. CUPTI's activity API is process-global, so only one tracer may
// exist at a time. Failures are exitsim::InputError with field "cupti".
class CuptiTracer {
 public:
  explicit CuptiTracer(CuptiTracerOptions options = {});
  // Flushes and disables collection; records not yet taken are discarded.
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Labels the CUDA calls this thread makes until the matching pop_op() as the engine op
  // `label` (CUPTI's external correlation, kind CUSTOM0). Returns the op's external id.
  std::uint64_t push_op(EngineOpLabel label);
  void pop_op();

  // Makes CUPTI hand over every buffered record, including those of running work (forced).
  void flush();
  // Flushes, then joins and moves out the rows gathered so far, in start order. Throws when
  // CUPTI dropped records (a trace with holes would calibrate wrong): raise buffer_bytes.
  std::vector<traces::OpTraceRow> take_rows();
  // take_rows() into `out`; returns the number of rows written.
  std::int64_t write(traces::OpTraceWriter& out);
  // What the last take_rows() joined: attributed and unattributed device work.
  ActivityJoinStats last_join() const;
  // Records CUPTI dropped because its buffers were full (raise buffer_bytes when non-zero).
  std::uint64_t dropped_records() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Labels the CUDA work of one engine op for as long as it lives.
class CuptiOpScope {
 public:
  CuptiOpScope(CuptiTracer* tracer, EngineOpLabel label) : tracer_(tracer) {
    if (tracer_ != nullptr)
      tracer_->push_op(std::move(label));
  }
  ~CuptiOpScope() {
    if (tracer_ != nullptr)
      tracer_->pop_op();
  }
  CuptiOpScope(const CuptiOpScope&) = delete;
  CuptiOpScope& operator=(const CuptiOpScope&) = delete;

 private:
  CuptiTracer* tracer_;
};

}  // namespace exitsim::profiler
