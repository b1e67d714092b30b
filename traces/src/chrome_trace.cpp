#include "exitsim/traces/chrome_trace.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "exitsim/traces/op_trace.hpp"
#include "trace_io.hpp"

namespace exitsim::traces {
namespace {

constexpr std::string_view k_preamble = "{\"traceEvents\":[\n";
// Room kept for the closing text, so that a capped file still ends as valid JSON within the cap.
constexpr std::int64_t k_trailer_reserve = 160;

std::string json_string(std::string_view text) {
  // replace: invalid UTF-8 in a kernel or op name must not make the whole trace unwritable.
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_args(const std::vector<ChromeArg>& args) {
  nlohmann::json object = nlohmann::json::object();
  for (const ChromeArg& arg : args) {
    std::visit([&](const auto& value) { object[arg.key] = value; }, arg.value);
  }
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool is_host_device(std::string_view device) {
  return device.starts_with("cpu");
}

}  // namespace

std::string format_chrome_us(TimeNs ns) {
  // Through the unsigned magnitude, so that INT64_MIN has one too.
  const std::uint64_t magnitude =
      ns < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

ChromeTraceWriter::ChromeTraceWriter(const std::string& path, ChromeTraceOptions options)
    : file_(std::make_unique<detail::AtomicOutputFile>(path)), options_(options) {
  file_->write(k_preamble);
  bytes_ = static_cast<std::int64_t>(k_preamble.size());
}

ChromeTraceWriter::~ChromeTraceWriter() = default;

void ChromeTraceWriter::emit(const std::string& event) {
  const std::int64_t separator = events_written_ > 0 ? 2 : 0;
  const std::int64_t size = static_cast<std::int64_t>(event.size()) + separator;
  if (!full_ && options_.max_bytes > 0 && bytes_ + size + k_trailer_reserve > options_.max_bytes) {
    // Stop for good rather than skip only the large events: a trace with holes in the middle
    // would look like idle time.
    full_ = true;
  }
  if (full_) {
    ++dropped_events_;
    return;
  }
  if (separator > 0)
    file_->write(",\n");
  file_->write(event);
  bytes_ += size;
  ++events_written_;
}

int ChromeTraceWriter::process_id(std::string_view process) {
  if (auto it = processes_.find(process); it != processes_.end())
    return it->second;
  const int pid = static_cast<int>(processes_.size()) + 1;
  processes_.emplace(std::string(process), pid);
  emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":{}}}}})",
                   pid, json_string(process)));
  return pid;
}

ChromeTrack ChromeTraceWriter::track(std::string_view process, std::string_view thread) {
  const int pid = process_id(process);
  auto key = std::make_pair(pid, std::string(thread));
  if (auto it = threads_.find(key); it != threads_.end())
    return {pid, it->second};
  const int tid = next_tid_++;
  threads_.emplace(std::move(key), tid);
  emit(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
                   pid, tid, json_string(thread)));
  return {pid, tid};
}

void ChromeTraceWriter::complete(ChromeTrack track, std::string_view name, TimeNs start,
                                 TimeNs duration, const std::vector<ChromeArg>& args,
                                 std::string_view category) {
  if (full_) {
    ++dropped_events_;
    return;
  }
  event_.clear();
  fmt::format_to(std::back_inserter(event_),
                 R"({{"name":{},"cat":{},"ph":"X","pid":{},"tid":{},"ts":{},"dur":{})",
                 json_string(name), json_string(category), track.pid, track.tid,
                 format_chrome_us(start), format_chrome_us(duration));
  if (!args.empty()) {
    event_ += ",\"args\":";
    event_ += json_args(args);
  }
  event_ += '}';
  emit(event_);
}

void ChromeTraceWriter::flow_start(ChromeTrack track, std::string_view name, TimeNs ts,
                                   std::uint64_t id) {
  emit(fmt::format(R"({{"name":{},"cat":"flow","ph":"s","id":{},"pid":{},"tid":{},"ts":{}}})",
                   json_string(name), id, track.pid, track.tid, format_chrome_us(ts)));
}

void ChromeTraceWriter::flow_end(ChromeTrack track, std::string_view name, TimeNs ts,
                                 std::uint64_t id) {
  emit(fmt::format(
      R"({{"name":{},"cat":"flow","ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{}}})",
      json_string(name), id, track.pid, track.tid, format_chrome_us(ts)));
}

void ChromeTraceWriter::counter(ChromeTrack track, std::string_view name, TimeNs ts,
                                const std::vector<ChromeArg>& series) {
  emit(fmt::format(R"({{"name":{},"ph":"C","pid":{},"ts":{},"args":{}}})", json_string(name),
                   track.pid, format_chrome_us(ts), json_args(series)));
}

void ChromeTraceWriter::finish() {
  if (file_->finished())
    return;
  std::string trailer = "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{";
  fmt::format_to(std::back_inserter(trailer),
                 R"("producer":"exitsim","truncated":{},"events":{},"dropped_events":{})",
                 truncated(), events_written_, dropped_events_);
  if (options_.max_bytes > 0) {
    fmt::format_to(std::back_inserter(trailer), R"(,"max_bytes":{})", options_.max_bytes);
  }
  trailer += "}}\n";
  file_->write(trailer);
  file_->finish();
}

std::int64_t write_op_trace_as_chrome(OpTraceReader& reader, ChromeTraceWriter& out) {
  struct End {
    ChromeTrack track;
    TimeNs ts = 0;
  };
  struct Link {
    std::optional<End> host;
    std::optional<End> device;
    bool linked = false;
  };
  // Host and device events of one id may come in either order (CUPTI delivers kernel records
  // long after the launch), so each id waits here until both ends are known.
  std::unordered_map<std::uint64_t, Link> links;
  std::map<std::pair<std::string, int>, ChromeTrack> tracks;
  std::int64_t ops = 0;
  while (std::optional<OpTraceRow> row = reader.next()) {
    ++ops;
    const bool host = is_host_device(row->device);
    auto key = std::make_pair(row->device, row->stream);
    auto it = tracks.find(key);
    if (it == tracks.end()) {
      const std::string thread = fmt::format("{} {}", host ? "thread" : "stream", row->stream);
      it = tracks.emplace(std::move(key), out.track(row->device, thread)).first;
    }
    const ChromeTrack track = it->second;
    out.complete(track, row->name, row->start_ns, row->duration_ns,
                 {{"batch_tokens", row->batch_tokens},
                  {"context_tokens", row->context_tokens},
                  {"depth", std::int64_t{row->depth}},
                  {"recursion", std::int64_t{row->recursion}},
                  {"step_id", row->step_id},
                  {"correlation_id", row->correlation_id}},
                 to_string(row->kind));
    if (row->correlation_id == 0)
      continue;
    Link& link = links[row->correlation_id];
    if (link.linked)
      continue;
    std::optional<End>& end = host ? link.host : link.device;
    if (!end)
      end = End{track, row->start_ns};
    if (link.host && link.device) {
      out.flow_start(link.host->track, "launch", link.host->ts, row->correlation_id);
      out.flow_end(link.device->track, "launch", link.device->ts, row->correlation_id);
      link = Link{.host = std::nullopt, .device = std::nullopt, .linked = true};
    }
  }
  return ops;
}

}  // namespace exitsim::traces
