#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/profiler/host_profiler.hpp"
#include "exitsim/traces/op_trace.hpp"

// GPU activity as the profiler needs it, free of CUPTI's types: the CUPTI tracer converts its
// records into these, and everything after that — joining device work to the host calls that
// launched it and to the engine op that asked for it, and writing op-trace rows — is plain C++
// that tests feed with synthetic records on machines without a GPU.
namespace exitsim::profiler {

enum class ActivityKind : std::uint8_t {
  kernel,
  memcpy,
  memset,
  runtime,          // a CUDA runtime API call on a host thread
  synchronization,  // a host thread blocked on a stream, event or context
  external_correlation,
};

struct ActivityRecord {
  ActivityKind kind = ActivityKind::kernel;
  std::string name;  // demangled kernel, runtime function, memcpy direction or wait type
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t thread = 0;  // runtime records: the calling host thread's id
  TimeNs start_ns = 0;       // on the profiler's clock (HostProfiler::origin())
  TimeNs end_ns = 0;
  // Shared by a runtime call and the device work it launched, and by the external correlation
  // record that names the engine op around that call.
  std::uint32_t correlation = 0;
  std::uint64_t external_id = 0;  // external_correlation records only
  std::uint64_t bytes = 0;        // memcpy and memset
};

// The engine op an external correlation id stands for: its name as in engine_ops.hpp, its kind
// and the calibration features of its call.
struct EngineOpLabel {
  std::string name;
  traces::OpKind kind = traces::OpKind::other;
  SpanShape shape;
};

struct ActivityJoinStats {
  std::int64_t device_records = 0;  // kernels, memcpys and memsets
  std::int64_t attributed = 0;      // of those, the ones whose launch carried an engine op label
  std::int64_t runtime_records = 0;
  std::int64_t waits = 0;  // synchronization records
  std::int64_t engine_ops = 0;
  // Device work no engine op claimed, by name (a kernel launched outside every labelled op).
  std::map<std::string, std::int64_t> unattributed;
};

// Collects records in any order (CUPTI hands buffers over out of order and from its own thread)
// and joins them when asked:
// - runtime calls become host rows (device "cpu", one stream per host thread in order of first
//   appearance), so the Chrome trace draws an arrow from each launch to its device work;
// - kernels, memcpys and memsets become device rows ("cuda:<device>", their stream) carrying the
//   features of the engine op whose label their launch was made under;
// - each labelled engine op with device work becomes one more row named as the engine names the
//   op (so calibration reads GPU traces exactly as CPU ones): from its first device record's
//   start to its last one's end, on the first record's device and stream;
// - synchronization waits become host rows on the waiting thread (joined through their
//   correlation id to the runtime call that waited), labelled like it.
class ActivityJoin {
 public:
  void add(const ActivityRecord& record);
  // The engine's label for an external id (pushed around the op's launches).
  void label(std::uint64_t external_id, EngineOpLabel label);

  // Rows in start order (ties: host rows first, then device rows, then engine ops), and what
  // the join found.
  std::vector<traces::OpTraceRow> rows(ActivityJoinStats* stats = nullptr) const;

 private:
  std::vector<ActivityRecord> records_;
  std::unordered_map<std::uint32_t, std::uint64_t> external_of_;  // correlation -> external id
  std::unordered_map<std::uint64_t, EngineOpLabel> labels_;
};

// A one-line account of a join, e.g. for the engine's summary: "412 of 412 device records
// attributed to 96 engine ops; 24 waits".
std::string describe(const ActivityJoinStats& stats);

}  // namespace exitsim::profiler
