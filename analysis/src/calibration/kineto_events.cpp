// Reading a PyTorch-profiler (Kineto) Chrome trace: which events are the model's operators, how
// they nest, which kernels each launched.
#include "kineto_events.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::analysis::kineto {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& key, const std::string& what) {
  throw InputError(SourceLocation{path, 0, 0, key}, what);
}

// A Kineto trace of a few profiled steps is some 10-100 MB of JSON (a few MB gzipped), and
// parsed it takes several times that in memory: 1 GiB of text, plain or inflated, is the most
// read. The gzip is inflated as it is parsed, so a small file that inflates to gigabytes stops
// at the cap (a 1 MB gzip of 1 GiB of spaces once took 3 GB).
constexpr std::uint64_t k_max_trace_bytes = std::uint64_t{1} << 30;

json read_trace_json(const std::string& path) {
  JsonInput input{path, "a PyTorch profiler trace (Chrome trace JSON)", k_max_trace_bytes,
                  k_max_trace_bytes};
  input.file_kind = "PyTorch profiler trace";
  return read_json_file(input);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string describe(const json& value) {
  if (value.is_array())
    return "a list";
  if (value.is_object())
    return "an object";
  return traces::json_shown(value);
}

// The fields of one "X" (complete) event that calibration reads.
struct Event {
  std::string category;  // lower case
  std::string name;
  std::string thread;  // "pid/tid"
  double ts = 0;
  double dur = 0;
  std::optional<std::int64_t> correlation;
  std::int64_t external_id = 0;  // "External id": a parent's is below its children's
  const json* args = nullptr;
};

class EventReader {
 public:
  explicit EventReader(std::string path) : path_(std::move(path)) {}

  std::optional<Event> read(const json& e, std::size_t index) const {
    const std::string at = fmt::format("traceEvents[{}]", index);
    if (!e.is_object())
      fail(path_, at, expected_found("an event object", describe(e)));
    const auto phase = e.find("ph");
    if (phase == e.end() || !phase->is_string()) {
      fail(path_, at + ".ph",
           expected_found("the event's phase as a string",
                          phase == e.end() ? "none" : describe(*phase)));
    }
    if (phase->get<std::string>() != "X")
      return std::nullopt;  // instants, flows (ac2g), counters, metadata: not needed
    Event out;
    out.category = lower(text(e, at, "cat"));
    out.name = text(e, at, "name");
    out.ts = number(e, at, "ts", false);
    out.dur = number(e, at, "dur", true);
    out.thread = id(e, at, "pid") + "/" + id(e, at, "tid");
    if (const auto args = e.find("args"); args != e.end()) {
      if (!args->is_object())
        fail(path_, at + ".args", expected_found("an object", describe(*args)));
      out.args = &*args;
      if (const auto id = args->find("External id"); id != args->end() && id->is_number_integer())
        out.external_id = id->get<std::int64_t>();
      if (const auto c = args->find("correlation"); c != args->end()) {
        if (!c->is_number_integer())
          fail(path_, at + ".args.correlation", expected_found("an integer", describe(*c)));
        out.correlation = c->get<std::int64_t>();
      }
    }
    return out;
  }

 private:
  std::string text(const json& e, const std::string& at, const char* key) const {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_string()) {
      fail(path_, at + "." + key,
           expected_found("a string", it == e.end() ? "none" : describe(*it)));
    }
    return it->get<std::string>();
  }
  double number(const json& e, const std::string& at, const char* key, bool non_negative) const {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_number() || (non_negative && it->get<double>() < 0)) {
      fail(path_, at + "." + key,
           expected_found(non_negative ? "a number of microseconds >= 0" : "a time in microseconds",
                          it == e.end() ? "none" : describe(*it)));
    }
    return it->get<double>();
  }
  std::string id(const json& e, const std::string& at, const char* key) const {
    const auto it = e.find(key);
    if (it == e.end() || !(it->is_number_integer() || it->is_string())) {
      fail(path_, at + "." + key,
           expected_found("a process or thread id", it == e.end() ? "none" : describe(*it)));
    }
    return it->is_string() ? it->get<std::string>() : std::to_string(it->get<std::int64_t>());
  }

  std::string path_;
};

bool is_operator(const std::string& category) {
  return category == "cpu_op" || category == "operator";
}
bool is_runtime(const std::string& category) {
  return category == "cuda_runtime" || category == "runtime" || category == "cuda_driver";
}
bool is_gpu_activity(const std::string& category) {
  return category == "kernel" || category == "gpu_memcpy" || category == "gpu_memset";
}

// The key of an operator's input shapes: "Input Dims", or "Input dims" as older PyTorch spells
// it; empty when the operator has neither.
std::string input_dims_key(const json& args) {
  for (const char* key : {"Input Dims", "Input dims"}) {
    if (args.contains(key))
      return key;
  }
  return "";
}

// "Input Dims": one entry per input, a list of sizes for a tensor, [] for anything else (a
// tensor list's entry, nested one deeper, counts as no tensor: its sizes are not one shape).
std::vector<std::vector<std::int64_t>> input_dims(const std::string& path, const Event& e,
                                                  std::size_t index) {
  std::vector<std::vector<std::int64_t>> out;
  if (e.args == nullptr)
    return out;
  const std::string key = input_dims_key(*e.args);
  if (key.empty())
    return out;
  const auto dims = e.args->find(key);
  const std::string at = fmt::format("traceEvents[{}].args.{}", index, key);
  if (!dims->is_array())
    fail(path, at, expected_found("a list of input shapes", describe(*dims)));
  for (const json& input : *dims) {
    std::vector<std::int64_t> shape;
    const bool tensor =
        input.is_array() && std::all_of(input.begin(), input.end(),
                                        [](const json& v) { return v.is_number_integer(); });
    if (tensor) {
      for (const json& size : input) {
        // No tensor dimension reaches 2^40 elements; larger ones would overflow the products.
        constexpr std::int64_t k_max_size = std::int64_t{1} << 40;
        if (size.get<std::int64_t>() < 0 || size.get<std::int64_t>() > k_max_size) {
          fail(path, at,
               expected_found(fmt::format("sizes from 0 to {}", k_max_size),
                              std::to_string(size.get<std::int64_t>())));
        }
        shape.push_back(size.get<std::int64_t>());
      }
    }
    out.push_back(std::move(shape));
  }
  return out;
}

using Indexed = std::pair<Event, std::size_t>;  // an event and its index in traceEvents

// The model thread's top-level operators, in start order: an operator nested in another is part
// of its parent's time, but a wrapper without shapes (torch.compile's "Torch-Compiled Region",
// whose ops carry the shapes) passes its children up instead; a wrapper with no child is kept.
std::vector<Operator> top_level_operators(const std::string& path, std::vector<Indexed>& operators,
                                          const std::string& model_thread) {
  // Ordered by start, longer first, so that a parent precedes the children that start with it.
  // Exact ties (integer-microsecond traces) go to the parent: its External id is the smaller.
  std::stable_sort(operators.begin(), operators.end(), [](const auto& a, const auto& b) {
    if (a.first.ts != b.first.ts)
      return a.first.ts < b.first.ts;
    if (a.first.dur != b.first.dur)
      return a.first.dur > b.first.dur;
    return a.first.external_id < b.first.external_id;
  });
  struct Open {
    double end = 0;
    bool passes_children = false;  // a top-level wrapper
    const Indexed* wrapper = nullptr;
    bool had_child = false;
  };
  std::vector<Open> open;
  std::vector<Operator> out;
  const auto emit = [&](const Indexed& e) {
    out.push_back({e.first.name, e.first.ts, e.first.dur, input_dims(path, e.first, e.second)});
  };
  const auto close = [&](const Open& o) {
    if (o.wrapper != nullptr && !o.had_child)
      emit(*o.wrapper);
  };
  for (const Indexed& indexed : operators) {
    const Event& e = indexed.first;
    if (e.thread != model_thread)
      continue;
    // Nested: its parent's time holds it. An operator of no duration at its parent's very end
    // (a view after the product, in a trace of whole microseconds) is the parent's too.
    while (!open.empty() && !(e.ts < open.back().end || (e.ts == open.back().end && e.dur == 0))) {
      close(open.back());
      open.pop_back();
    }
    const bool top = open.empty() || open.back().passes_children;
    if (!open.empty() && top)
      open.back().had_child = true;
    const bool wrapper = top && (e.args == nullptr || input_dims_key(*e.args).empty());
    if (top && !wrapper)
      emit(indexed);
    // A child ends with its parent at the latest (whole-microsecond traces round a child past
    // its parent's end; what starts after the parent is not the child's).
    const double end = open.empty() ? e.ts + e.dur : std::min(e.ts + e.dur, open.back().end);
    open.push_back({end, wrapper, wrapper ? &indexed : nullptr, false});
  }
  for (auto it = open.rbegin(); it != open.rend(); ++it)
    close(*it);
  std::stable_sort(out.begin(), out.end(),
                   [](const Operator& a, const Operator& b) { return a.start_us < b.start_us; });
  return out;
}

// What the trace says about itself: framework, device, processes.
void read_metadata(const json& root, Trace& trace) {
  if (const auto f = root.find("exitsim_framework"); f != root.end() && f->is_string())
    trace.framework = f->get<std::string>();
  if (const auto h = root.find("exitsim_hardware"); h != root.end() && h->is_string())
    trace.hardware = h->get<std::string>();
  const auto devices = root.find("deviceProperties");
  if (trace.hardware.empty() && devices != root.end() && devices->is_array() && !devices->empty() &&
      devices->front().is_object()) {
    const json& device = devices->front();
    if (const auto name = device.find("name"); name != device.end() && name->is_string())
      trace.hardware = name->get<std::string>();
  }
  const auto info = root.find("distributedInfo");
  if (info != root.end() && info->is_object() && info->contains("world_size")) {
    const json& size = (*info)["world_size"];
    constexpr std::int64_t k_max_world = 1 << 16;
    if (!size.is_number_integer() || size.get<std::int64_t>() < 1 ||
        size.get<std::int64_t>() > k_max_world) {
      fail(trace.path, "distributedInfo.world_size",
           expected_found(fmt::format("a number of processes from 1 to {}", k_max_world),
                          describe(size)));
    }
    trace.world_size = size.get<int>();
  }
}

}  // namespace

Trace read_trace(const std::string& path) {
  const json root = read_trace_json(path);
  if (root.is_array()) {
    fail(path, "",
         expected_found("a torch.profiler (Kineto) trace, an object with \"traceEvents\"",
                        "a JSON list of events: the legacy autograd profiler's export, which "
                        "records no input shapes (profile with torch.profiler under Kineto, or "
                        "see training/kineto_traces.py)"));
  }
  const auto events = root.is_object() ? root.find("traceEvents") : root.end();
  if (!root.is_object() || events == root.end() || !events->is_array()) {
    fail(path, "traceEvents",
         expected_found("a list of trace events", root.is_object() ? "none" : describe(root)));
  }

  Trace trace;
  trace.path = path;
  const EventReader reader(path);
  std::vector<Indexed> operators;
  std::vector<Event> annotations;
  std::vector<Event> runtime;
  std::vector<Event> gpu;
  std::map<std::string, std::int64_t> operators_per_thread;
  for (std::size_t i = 0; i < events->size(); ++i) {
    std::optional<Event> e = reader.read((*events)[i], i);
    if (!e)
      continue;
    if (is_operator(e->category)) {
      ++operators_per_thread[e->thread];
      operators.emplace_back(std::move(*e), i);
    } else if (e->category == "user_annotation") {
      annotations.push_back(std::move(*e));
    } else if (is_runtime(e->category)) {
      runtime.push_back(std::move(*e));
    } else if (is_gpu_activity(e->category)) {
      gpu.push_back(std::move(*e));
    }
  }
  if (operators.empty()) {
    fail(path, "traceEvents",
         expected_found("CPU operator events (category cpu_op, or Operator in older traces)",
                        "none: profile with the CPU activity on"));
  }
  // The model's thread issues the most operators (a data loader or a logger issues a few).
  const std::string model_thread =
      std::max_element(operators_per_thread.begin(), operators_per_thread.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  trace.operators = top_level_operators(path, operators, model_thread);
  const bool any_shape =
      std::any_of(trace.operators.begin(), trace.operators.end(), [](const Operator& op) {
        return std::any_of(op.input_dims.begin(), op.input_dims.end(),
                           [](const auto& d) { return !d.empty(); });
      });
  if (!any_shape) {
    fail(path, "traceEvents[].args.Input Dims",
         expected_found("operator input shapes (torch.profiler with record_shapes=True)", "none"));
  }
  for (const Event& a : annotations) {
    Range range{a.name, a.ts, a.ts + a.dur};
    if (a.name.starts_with("ProfilerStep#"))
      trace.steps.push_back(std::move(range));
    else if (a.thread == model_thread)
      trace.ranges.push_back(std::move(range));
  }
  const auto by_start = [](const Range& a, const Range& b) { return a.start_us < b.start_us; };
  std::sort(trace.steps.begin(), trace.steps.end(), by_start);
  std::sort(trace.ranges.begin(), trace.ranges.end(), by_start);
  for (const Event& r : runtime) {
    if (r.thread == model_thread && r.name.find("StreamBeginCapture") != std::string::npos)
      trace.captures_us.push_back(r.ts);
  }

  if (!gpu.empty()) {
    std::map<std::int64_t, RuntimeCall> launches;
    for (const Event& r : runtime) {
      if (r.correlation)
        launches[*r.correlation] = {r.name, r.thread == model_thread, r.ts};
    }
    std::vector<GpuActivity> activities;
    for (const Event& k : gpu)
      activities.push_back({k.correlation.value_or(-1), k.ts, k.dur});
    std::vector<double> cpu_end;
    for (const Operator& op : trace.operators)
      cpu_end.push_back(op.start_us + op.duration_us);
    attribute_gpu_time(launches, activities, cpu_end, trace);
  }
  read_metadata(root, trace);
  return trace;
}

}  // namespace exitsim::analysis::kineto
