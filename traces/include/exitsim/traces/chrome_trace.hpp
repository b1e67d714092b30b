#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "exitsim/core/time.hpp"

namespace exitsim::traces {

namespace detail {
class AtomicOutputFile;
}  // namespace detail

struct OpTraceRow;
template <typename Row>
class CsvRowReader;
using OpTraceReader = CsvRowReader<OpTraceRow>;

// A key/value shown in the viewer's details pane (or one series of a counter).
struct ChromeArg {
  std::string key;
  std::variant<std::int64_t, std::uint64_t, double, std::string> value;
};

// A timeline row: a process (pid) and a thread (tid) within it.
struct ChromeTrack {
  int pid = 0;
  int tid = 0;
};

struct ChromeTraceOptions {
  // Stop adding events once the file would exceed this many bytes (0 = no limit). Traces of
  // long runs otherwise grow past what Perfetto and chrome://tracing can load.
  std::int64_t max_bytes = 0;
};

// Streams Chrome trace-event JSON ({"traceEvents":[...],"displayTimeUnit":"ns"}) that Perfetto and
// chrome://tracing load. Times are integer nanoseconds and are printed as microseconds with three
// decimals (1234567 ns -> 1234.567), formatted from the integer so no precision is lost.
// Nothing appears at `path` until finish() succeeds.
class ChromeTraceWriter {
 public:
  explicit ChromeTraceWriter(const std::string& path, ChromeTraceOptions options = {});
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // The track for (process, thread), created with its name metadata on first use.
  ChromeTrack track(std::string_view process, std::string_view thread);

  // A complete ("ph":"X") event.
  void complete(ChromeTrack track, std::string_view name, TimeNs start, TimeNs duration,
                const std::vector<ChromeArg>& args = {}, std::string_view category = "op");
  // The two ends of a flow arrow; `id` pairs them, and each end binds to the slice that encloses
  // `ts` on its track (the end uses "bp":"e" so that it binds to a slice starting exactly at ts).
  void flow_start(ChromeTrack track, std::string_view name, TimeNs ts, std::uint64_t id);
  void flow_end(ChromeTrack track, std::string_view name, TimeNs ts, std::uint64_t id);
  // A counter ("ph":"C") sample: each arg is one series; values must be numbers.
  void counter(ChromeTrack track, std::string_view name, TimeNs ts,
               const std::vector<ChromeArg>& series);

  // Closes the JSON (recording truncation in "otherData") and renames the file into place.
  void finish();

  bool truncated() const { return dropped_events_ > 0; }
  std::int64_t dropped_events() const { return dropped_events_; }
  std::int64_t events_written() const { return events_written_; }

 private:
  void emit(const std::string& event);
  int process_id(std::string_view process);

  std::unique_ptr<detail::AtomicOutputFile> file_;
  ChromeTraceOptions options_;
  std::map<std::string, int, std::less<>> processes_;
  std::map<std::pair<int, std::string>, int> threads_;
  std::int64_t bytes_ = 0;
  std::int64_t events_written_ = 0;
  std::int64_t dropped_events_ = 0;
  int next_tid_ = 1;
  bool full_ = false;
  std::string event_;
};

// "1234.567" for 1234567 ns: microseconds with nanosecond precision, exact for every int64.
std::string format_chrome_us(TimeNs ns);

// Copies an op trace into `out`: one process per device, one thread per stream, and a flow arrow
// from the host event ("cpu..." device) to the device event of each correlation id they share
// (the first of each when an id repeats). Returns the number of ops read.
std::int64_t write_op_trace_as_chrome(OpTraceReader& reader, ChromeTraceWriter& out);

}  // namespace exitsim::traces
