#include "exitsim/profiler/cupti_tracer.hpp"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/profiler/kernel_kind.hpp"

namespace exitsim::profiler {

struct CuptiTracer::State {
  CuptiTracerOptions options;
  std::int64_t origin_ns = 0;
  std::vector<CUpti_ActivityKind> enabled;

  // Filled from CUPTI's buffer-completion callback, which may run on a CUPTI thread, and from
  // push_op() on the engine's.
  mutable std::mutex mutex;
  ActivityJoin join;
  ActivityJoinStats last_join;
  std::uint64_t next_external_id = 1;
  std::uint64_t dropped = 0;
  std::string deferred_error;  // a failure inside a callback, reported by the next take_rows()
};

namespace {

constexpr std::size_t k_record_alignment = 8;  // ACTIVITY_RECORD_ALIGNMENT in CUPTI's samples

// The tracer whose buffers CUPTI fills: the activity API takes plain function pointers.
std::atomic<CuptiTracer::State*> g_active{nullptr};

std::string result_string(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
  return text;
}

InputError cupti_error(std::string_view call, CUptiResult result) {
  return InputError(SourceLocation{.file = "", .line = 0, .column = 0, .field = "cupti"},
                    std::string(call) + " failed: " + result_string(result));
}

void check_cupti(CUptiResult result, std::string_view call) {
  if (result != CUPTI_SUCCESS)
    throw cupti_error(call, result);
}

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// CUPTI stamps records with this, so they share steady_clock with HostProfiler.
std::uint64_t CUPTIAPI steady_timestamp() {
  return static_cast<std::uint64_t>(steady_ns(std::chrono::steady_clock::now()));
}

std::string demangle(const char* name) {
  if (name == nullptr)
    return "<unnamed kernel>";
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || readable == nullptr)
    return name;
  std::string out(readable);
  std::free(readable);  // NOLINT: __cxa_demangle allocates with malloc
  return out;
}

std::string memcpy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

std::string wait_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "wait: event synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "wait: stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "wait: stream synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "wait: context synchronize";
    default:
      return "wait";
  }
}

TimeNs relative(std::uint64_t t, std::int64_t origin_ns) {
  return static_cast<TimeNs>(t) - origin_ns;
}

// Converts one CUPTI record; false for kinds the tracer does not use.
bool to_activity(const CUpti_Activity& record, std::int64_t origin_ns, ActivityRecord& out) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& kernel = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
      out.kind = ActivityKind::kernel;
      out.name = demangle(kernel.name);
      out.device = kernel.deviceId;
      out.stream = kernel.streamId;
      out.start_ns = relative(kernel.start, origin_ns);
      out.end_ns = relative(kernel.end, origin_ns);
      out.correlation = kernel.correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
      out.kind = ActivityKind::memcpy;
      out.name = memcpy_name(copy.copyKind);
      out.device = copy.deviceId;
      out.stream = copy.streamId;
      out.start_ns = relative(copy.start, origin_ns);
      out.end_ns = relative(copy.end, origin_ns);
      out.correlation = copy.correlationId;
      out.bytes = copy.bytes;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& set = reinterpret_cast<const CUpti_ActivityMemset4&>(record);
      out.kind = ActivityKind::memset;
      out.name = "memset";
      out.device = set.deviceId;
      out.stream = set.streamId;
      out.start_ns = relative(set.start, origin_ns);
      out.end_ns = relative(set.end, origin_ns);
      out.correlation = set.correlationId;
      out.bytes = set.bytes;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto& api = reinterpret_cast<const CUpti_ActivityAPI&>(record);
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, api.cbid, &name) != CUPTI_SUCCESS ||
          name == nullptr) {
        name = "cuda runtime call";
      }
      out.kind = ActivityKind::runtime;
      out.name = name;
      out.thread = api.threadId;
      out.start_ns = relative(api.start, origin_ns);
      out.end_ns = relative(api.end, origin_ns);
      out.correlation = api.correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& wait = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
      out.kind = ActivityKind::synchronization;
      out.name = wait_name(wait.type);
      out.stream = wait.streamId;
      out.start_ns = relative(wait.start, origin_ns);
      out.end_ns = relative(wait.end, origin_ns);
      out.correlation = wait.correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& link = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      if (link.externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        return false;
      out.kind = ActivityKind::external_correlation;
      out.correlation = link.correlationId;
      out.external_id = link.externalId;
      return true;
    }
    default:
      return false;
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  CuptiTracer::State* state = g_active.load();
  const std::size_t bytes = state != nullptr ? state->options.buffer_bytes : std::size_t{1} << 20;
  *buffer = static_cast<std::uint8_t*>(
      ::operator new (bytes, std::align_val_t{k_record_alignment}, std::nothrow));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_size) {
  CuptiTracer::State* state = g_active.load();
  if (state != nullptr) {
    std::lock_guard lock(state->mutex);
    CUpti_Activity* record = nullptr;
    while (true) {
      const CUptiResult result = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (result == CUPTI_ERROR_MAX_LIMIT_REACHED)
        break;
      if (result != CUPTI_SUCCESS) {
        if (state->deferred_error.empty()) {
          state->deferred_error = cupti_error("cuptiActivityGetNextRecord", result).message();
        }
        break;
      }
      ActivityRecord activity;
      if (to_activity(*record, state->origin_ns, activity))
        state->join.add(activity);
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
      state->dropped += dropped;
    }
  }
  ::operator delete (buffer, std::align_val_t{k_record_alignment});
}

}  // namespace

CuptiTracer::CuptiTracer(CuptiTracerOptions options) : state_(std::make_unique<State>()) {
  state_->options = options;
  state_->origin_ns = steady_ns(options.origin.value_or(std::chrono::steady_clock::now()));
  State* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, state_.get())) {
    throw std::logic_error("CuptiTracer: another tracer is already collecting");
  }
  try {
    // Before any kind is enabled, or early records would carry CUPTI's own clock.
    check_cupti(cuptiActivityRegisterTimestampCallback(steady_timestamp),
                "cuptiActivityRegisterTimestampCallback");
    check_cupti(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks");
    const std::pair<bool, CUpti_ActivityKind> kinds[] = {
        {options.kernels, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
        {options.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY},
        {options.memset, CUPTI_ACTIVITY_KIND_MEMSET},
        {options.runtime, CUPTI_ACTIVITY_KIND_RUNTIME},
        {options.synchronization, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
        // Always: it is how device work finds the engine op it belongs to.
        {true, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION},
    };
    for (const auto& [wanted, kind] : kinds) {
      if (!wanted)
        continue;
      check_cupti(cuptiActivityEnable(kind),
                  "cuptiActivityEnable(" + std::to_string(static_cast<int>(kind)) + ")");
      state_->enabled.push_back(kind);
    }
  } catch (...) {
    for (CUpti_ActivityKind kind : state_->enabled)
      cuptiActivityDisable(kind);
    g_active.store(nullptr);
    throw;
  }
}

CuptiTracer::~CuptiTracer() {
  // Errors are ignored here: a destructor cannot report them, and collection is over anyway.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : state_->enabled)
    cuptiActivityDisable(kind);
  g_active.store(nullptr);
}

void CuptiTracer::flush() {
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
}

std::uint64_t CuptiTracer::push_op(EngineOpLabel label) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(state_->mutex);
    id = state_->next_external_id++;
    state_->join.label(id, std::move(label));
  }
  check_cupti(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
              "cuptiActivityPushExternalCorrelationId");
  return id;
}

void CuptiTracer::pop_op() {
  std::uint64_t id = 0;
  check_cupti(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id),
              "cuptiActivityPopExternalCorrelationId");
}

std::vector<traces::OpTraceRow> CuptiTracer::take_rows() {
  flush();
  std::lock_guard lock(state_->mutex);
  if (!state_->deferred_error.empty()) {
    const std::string message = std::exchange(state_->deferred_error, {});
    throw InputError(SourceLocation{.file = "", .line = 0, .column = 0, .field = "cupti"}, message);
  }
  if (state_->dropped > 0) {
    throw InputError(SourceLocation{.file = "", .line = 0, .column = 0, .field = "cupti"},
                     expected_found("no dropped activity records",
                                    std::to_string(state_->dropped) +
                                        " dropped (raise CuptiTracerOptions::buffer_bytes)"));
  }
  std::vector<traces::OpTraceRow> rows = state_->join.rows(&state_->last_join);
  state_->join = ActivityJoin{};
  return rows;
}

ActivityJoinStats CuptiTracer::last_join() const {
  std::lock_guard lock(state_->mutex);
  return state_->last_join;
}

std::int64_t CuptiTracer::write(traces::OpTraceWriter& out) {
  const std::vector<traces::OpTraceRow> rows = take_rows();
  for (const traces::OpTraceRow& row : rows)
    out.write(row);
  return static_cast<std::int64_t>(rows.size());
}

std::uint64_t CuptiTracer::dropped_records() const {
  std::lock_guard lock(state_->mutex);
  return state_->dropped;
}

}  // namespace exitsim::profiler
