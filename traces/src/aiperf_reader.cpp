// NVIDIA AIPerf exports (ai-dynamo/aiperf @ db4f639). profile_export.jsonl holds one
// MetricRecordInfo per line (aiperf/common/models/record_models.py): metadata.request_start_ns
// (epoch ns), metadata.benchmark_phase, metadata.was_cancelled, metrics (each {"value",
// "unit"} in display units: input_sequence_length, output_sequence_length (output plus
// reasoning tokens), time_to_first_token, inter_chunk_latency (a list), request_latency; a failed
// request has error_isl only) and error ({code, type, message} or null).
// profile_export_aiperf.json is JsonExportData (aiperf/common/models/export_models.py): each
// metric {"unit", "avg", "p50", "p90", "p99", ...} by its tag, and input_config (the user's
// configuration, set fields only: loadgen.request_rate, request_rate_mode, concurrency).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "benchmark_json.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces::benchmark_json {
namespace {

// The nanoseconds in one of AIPerf's time units (MetricTimeUnit's tags); 0 for another unit.
double ns_per(const std::string& unit) {
  if (unit == "ns")
    return 1;
  if (unit == "us")
    return 1e3;
  if (unit == "ms")
    return 1e6;
  if (unit == "sec")
    return 1e9;
  return 0;
}

// metrics[key]'s {"value", "unit"}: its value, and the unit's ns (0 where it is no time unit).
struct Metric {
  const json* value = nullptr;
  double ns = 0;
};

std::optional<Metric> metric(const json& metrics, const JsonPlace& at, const std::string& key,
                             bool time) {
  const json* m = at.optional(metrics, key);
  if (m == nullptr)
    return std::nullopt;
  const JsonPlace in = at.nested(key);
  if (!m->is_object())
    at.fail(key, "an object {\"value\", \"unit\"}", json_shown(*m));
  Metric out;
  out.value = &in.required(*m, "value", "the metric's value");
  if (time) {
    const std::string unit = in.text(*m, "unit");
    out.ns = ns_per(unit);
    if (out.ns == 0)
      in.fail("unit", "a time unit (ns, us, ms or sec)", json_shown(m->at("unit")));
  }
  return out;
}

TimeNs time_of(const Metric& m, const JsonPlace& at, const std::string& key) {
  const double v = at.number(*m.value, key, "a time >= 0 and finite");
  if (v < 0 || v * m.ns > static_cast<double>(k_max_request_ns))
    at.fail(key, "a time >= 0 and at most a day", json_shown(*m.value));
  return static_cast<TimeNs>(std::llround(v * m.ns));
}

struct Record {
  std::int64_t start = 0;  // epoch ns
  std::int64_t end = 0;    // the last response or the error, epoch ns
  BenchmarkRequest request;
};

std::int64_t epoch_ns(const json& metadata, const JsonPlace& meta, const char* key) {
  const std::string expected = "an epoch time in ns (an integer from 0 to 4e18, the year 2096)";
  const json& value = meta.required(metadata, key, expected);
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
      value.get<double>() > k_max_epoch_seconds * 1e9)
    meta.fail(key, expected, json_shown(value));
  return value.get<std::int64_t>();
}

// One record.
Record record(const json& root, const JsonPlace& at, bool& gaps_recorded) {
  if (!root.is_object())
    at.fail("", "an object (one AIPerf record)", json_shown(root));
  const json& metadata = at.object(root, "metadata");
  const JsonPlace meta = at.nested("metadata");
  Record out;
  out.start = epoch_ns(metadata, meta, "request_start_ns");
  out.end = epoch_ns(metadata, meta, "request_end_ns");
  if (out.end < out.start) {
    meta.fail("request_end_ns", fmt::format("a time >= request_start_ns ({})", out.start),
              fmt::format("{}", out.end));
  }
  BenchmarkRequest& r = out.request;
  const json& metrics = at.object(root, "metrics");
  const JsonPlace in = at.nested("metrics");
  const auto tokens = [&](const char* key, std::int64_t least) -> std::int64_t {
    const std::optional<Metric> m = metric(metrics, in, key, false);
    return m ? in.nested(key).count(*m->value, "value", least) : -1;
  };
  if (const json* error = at.optional(root, "error")) {
    r.failed = true;
    const json* message = error->is_object() ? at.optional(*error, "message") : nullptr;
    r.failure =
        message && message->is_string() ? failure_of(message->get<std::string>()) : "errored";
  } else if (const json* cancelled = meta.optional(metadata, "was_cancelled");
             cancelled && cancelled->is_boolean() && cancelled->get<bool>()) {
    r.failed = true;
    r.failure = "cancelled";
  }
  r.input_tokens = std::max<std::int64_t>(
      0, tokens(r.failed ? "error_isl" : "input_sequence_length", r.failed ? 0 : 1));
  if (r.failed)
    return out;
  if (r.input_tokens == 0)
    in.required(metrics, "input_sequence_length", "the prompt's tokens");
  r.output_tokens = tokens("output_sequence_length", 0);
  if (r.output_tokens < 0)
    r.output_tokens = std::max<std::int64_t>(0, tokens("output_token_count", 0));
  if (const std::optional<Metric> ttft = metric(metrics, in, "time_to_first_token", true))
    r.ttft = time_of(*ttft, in.nested("time_to_first_token"), "value");
  if (const std::optional<Metric> gaps = metric(metrics, in, "inter_chunk_latency", true)) {
    const JsonPlace list = in.nested("inter_chunk_latency");
    if (!gaps->value->is_array())
      list.fail("value", "a list of times", json_shown(*gaps->value));
    for (std::size_t k = 0; k < gaps->value->size(); ++k) {
      r.itls.push_back(
          time_of(Metric{&(*gaps->value)[k], gaps->ns}, list, fmt::format("value[{}]", k)));
      r.decode += r.itls.back();
      if (r.ttft + r.decode > k_max_request_ns)
        list.fail(fmt::format("value[{}]", k), "a request streaming for at most a day",
                  fmt::format("{:.3f} s by this gap", to_seconds(r.ttft + r.decode)));
    }
  } else if (r.output_tokens > 1) {
    gaps_recorded = false;
    if (const std::optional<Metric> latency = metric(metrics, in, "request_latency", true)) {
      const TimeNs total = time_of(*latency, in.nested("request_latency"), "value");
      r.decode = std::max<TimeNs>(0, total - r.ttft);
    }
  }
  check_request(r, in, "time_to_first_token");
  return out;
}

}  // namespace

bool is_aiperf_record(const json& root) {
  const auto metadata = root.find("metadata");
  return metadata != root.end() && metadata->is_object() &&
         metadata->contains("request_start_ns") && root.contains("metrics");
}

bool is_aiperf_summary(const json& root) {
  if (root.contains("input_config"))
    return true;
  const auto ttft = root.find("time_to_first_token");
  return ttft != root.end() && ttft->is_object() && ttft->contains("unit");
}

ServingBenchmark read_aiperf_records(const std::vector<std::pair<std::int64_t, json>>& records,
                                     const std::string& path) {
  ServingBenchmark b;
  b.path = path;
  b.format = ServingBenchmarkFormat::aiperf;
  b.request_rate.reset();
  std::vector<Record> sent;
  std::int64_t warmup = 0;
  for (const auto& [line, root] : records) {
    const JsonPlace at(path, line);
    if (root.is_object()) {
      const json* metadata = at.optional(root, "metadata");
      const json* phase =
          metadata && metadata->is_object() ? at.optional(*metadata, "benchmark_phase") : nullptr;
      if (phase && phase->is_string() && phase->get<std::string>() != "profiling") {
        ++warmup;  // AIPerf's warm-up requests are no part of its figures
        continue;
      }
    }
    sent.push_back(record(root, at, b.gaps_recorded));
  }
  const JsonPlace file(path, 0);
  if (sent.empty())
    file.fail("metadata.benchmark_phase", "at least one record of the profiling phase", "none");
  std::stable_sort(sent.begin(), sent.end(),
                   [](const Record& a, const Record& c) { return a.start < c.start; });
  const std::int64_t first = sent.front().start;
  std::int64_t last = first;
  for (Record& r : sent) {
    r.request.sent = r.start - first;
    last = std::max(last, r.end);
    b.requests.push_back(std::move(r.request));
  }
  require_a_success(b, file);
  // AIPerf's benchmark_duration: the first send to the last response.
  b.duration_s = std::max(1e-9, static_cast<double>(last - first) / 1e9);
  if (warmup > 0) {
    b.notes.push_back(fmt::format(
        "{} warm-up record(s) of AIPerf left out (benchmark_phase not profiling)", warmup));
  }
  return b;
}

ServingBenchmark read_aiperf_summary(const json& root, const std::string& path) {
  const JsonPlace place(path, 0);
  ServingBenchmark b;
  b.path = path;
  b.format = ServingBenchmarkFormat::aiperf;
  b.backend = "aiperf";
  // The figures exitsim compares, as "<metric>.<statistic>" in ms (times) or per second.
  for (const char* name :
       {"time_to_first_token", "inter_token_latency", "inter_chunk_latency", "request_latency",
        "request_throughput", "output_token_throughput", "request_count", "error_request_count",
        "input_sequence_length", "output_sequence_length", "benchmark_duration"}) {
    const json* m = place.optional(root, name);
    if (m == nullptr)
      continue;
    const JsonPlace at = place.nested(name);
    if (!m->is_object())
      place.fail(name, "an object {\"unit\", \"avg\", \"p50\", ...}", json_shown(*m));
    const std::string unit = at.text(*m, "unit");
    const double ns = ns_per(unit);
    const bool time = std::string_view(name) != "request_throughput" &&
                      std::string_view(name) != "output_token_throughput" &&
                      !std::string_view(name).ends_with("count") &&
                      !std::string_view(name).ends_with("length");
    if (time && ns == 0)
      at.fail("unit", "a time unit (ns, us, ms or sec)", json_shown(unit));
    for (const char* statistic : {"avg", "p50", "p90", "p99"}) {
      if (const json* v = at.optional(*m, statistic)) {
        const double x = at.number(*v, statistic, "a finite number");
        b.summary[fmt::format("{}.{}", name, statistic)] = time ? x * ns / 1e6 : x;
      }
    }
  }
  const auto figure = [&](const char* key) -> std::optional<double> {
    const auto it = b.summary.find(key);
    return it == b.summary.end() ? std::nullopt : std::optional<double>(it->second);
  };
  BenchmarkSummaryCounts c;
  const std::optional<double> completed = figure("request_count.avg");
  if (!completed || !(*completed >= 1) || *completed > 1e12) {
    place.fail("request_count.avg", "the number of completed requests (>= 1)",
               completed ? fmt::format("{}", *completed) : "none");
  }
  c.completed = std::llround(*completed);
  c.sent = c.completed + std::llround(std::max(0.0, figure("error_request_count.avg").value_or(0)));
  c.mean_input_tokens = figure("input_sequence_length.avg");
  c.mean_output_tokens = figure("output_sequence_length.avg");
  c.mean_input_from = "input_sequence_length.avg";
  c.mean_output_from = "output_sequence_length.avg";
  b.summary_only = c;
  if (const std::optional<double> duration = figure("benchmark_duration.avg"))
    b.duration_s = *duration / 1e3;  // in ms, as every time above
  // How the requests were sent: at a rate (Poisson unless constant), else a closed loop of
  // `concurrency` (AIPerf's default: 1).
  b.burstiness_given = false;
  b.max_concurrency = 1;
  if (const json* config = place.optional(root, "input_config"); config && config->is_object()) {
    const JsonPlace at = place.nested("input_config");
    if (const json* endpoint = at.optional(*config, "endpoint");
        endpoint && endpoint->is_object()) {
      const auto names = endpoint->find("model_names");
      if (names != endpoint->end() && names->is_array() && !names->empty() &&
          names->front().is_string())
        b.model_id = names->front().get<std::string>();
    }
    if (const json* loadgen = at.optional(*config, "loadgen")) {
      const JsonPlace load = at.nested("loadgen");
      if (!loadgen->is_object())
        at.fail("loadgen", "an object", json_shown(*loadgen));
      if (const json* rate = load.optional(*loadgen, "request_rate")) {
        const double r = load.number(*rate, "request_rate", "a request rate > 0");
        if (!(r > 0))
          load.fail("request_rate", "a request rate > 0", json_shown(*rate));
        b.request_rate = r;
        b.max_concurrency.reset();
      }
      if (const json* limit = load.optional(*loadgen, "concurrency")) {
        if (!limit->is_number_integer() || limit->get<std::int64_t>() < 1)
          load.fail("concurrency", "null or an integer >= 1", json_shown(*limit));
        b.max_concurrency = limit->get<std::int64_t>();
      }
      const std::string mode = load.text(*loadgen, "request_rate_mode");
      if (mode == "constant") {
        b.burstiness = std::numeric_limits<double>::infinity();
        b.burstiness_given = true;
      } else if (!mode.empty() && mode != "poisson" && mode != "concurrency_burst") {
        load.fail("request_rate_mode", "constant, poisson or concurrency_burst", json_shown(mode));
      }
    }
  }
  return b;
}

}  // namespace exitsim::traces::benchmark_json
