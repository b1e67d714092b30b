// GuideLLM reports (`guidellm benchmark --outputs report.json`), one run per entry of
// "benchmarks". The per-request fields are GuideLLM's GenerativeRequestStats
// (vllm-project/guidellm, src/guidellm/schemas/request_stats.py, ee7a774): request_start_time
// (epoch seconds: info.timings.request_start), prompt_tokens, output_tokens,
// time_to_first_token_ms (first token - request_start) and inter_token_latency_ms ((last token -
// first token) / (output_tokens - 1), null for fewer than two tokens), under
// requests.successful, requests.errored and requests.incomplete; the run's strategy under
// config.strategy (type_ synchronous, concurrent, throughput, constant, poisson, async; rate,
// max_concurrency, streams) and its duration in seconds.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "benchmark_json.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces::benchmark_json {
namespace {

// What GuideLLM's strategy did that a replay at the recorded send times cannot follow: a closed
// loop sends a request when another finishes, which a faster or slower server moves.
struct Strategy {
  std::string name;
  std::optional<double> rate;
  std::optional<std::int64_t> in_flight;  // a closed loop's limit on requests in flight
};

Strategy strategy_of(const json& benchmark, const JsonPlace& place) {
  const JsonPlace config = place.nested("config");
  const json& strategy = config.object(place.object(benchmark, "config"), "strategy");
  const JsonPlace at = config.nested("strategy");
  Strategy s;
  s.name = at.text(strategy, "type_");
  if (s.name.empty())
    at.fail("type_", "GuideLLM's strategy type (synchronous, constant, poisson, ...)", "none");
  if (const json* rate = at.optional(strategy, "rate")) {
    const double r = at.number(*rate, "rate", "a request rate > 0");
    if (!(r > 0))
      at.fail("rate", "a request rate > 0", json_shown(*rate));
    s.rate = r;
  }
  const auto limit = [&](const char* key) -> std::optional<std::int64_t> {
    const json* value = at.optional(strategy, key);
    if (value == nullptr)
      return std::nullopt;
    if (!value->is_number_integer() || value->get<std::int64_t>() < 1)
      at.fail(key, "an integer >= 1", json_shown(*value));
    return value->get<std::int64_t>();
  };
  if (s.name == "synchronous")
    s.in_flight = 1;
  else if (s.name == "concurrent")
    s.in_flight = limit("streams");
  else
    s.in_flight = limit("max_concurrency");  // a rate's too, where the rate outran the server
  return s;
}

std::string run_name(const Strategy& s) {
  if (s.rate)
    return fmt::format("{} at {:.4g} req/s", s.name, *s.rate);
  if (s.in_flight && s.name != "synchronous")
    return fmt::format("{} ({} in flight at most)", s.name, *s.in_flight);
  return s.name;
}

class GuidellmRun {
 public:
  explicit GuidellmRun(JsonPlace place) : place_(std::move(place)) {}

  ServingBenchmark read(const json& benchmark) {
    ServingBenchmark b;
    b.path = place_.path();
    b.format = ServingBenchmarkFormat::guidellm;
    b.gaps_recorded = false;
    if (!benchmark.is_object())
      place_.fail("", "an object (one GuideLLM benchmark)", json_shown(benchmark));
    const Strategy s = strategy_of(benchmark, place_);
    b.run_name = run_name(s);
    b.request_rate = s.rate;
    const std::string expected = "the benchmark's duration in seconds > 0";
    const json& duration = place_.required(benchmark, "duration", expected);
    b.duration_s = place_.number(duration, "duration", expected);
    if (!(b.duration_s > 0))
      place_.fail("duration", expected, json_shown(duration));
    const json& lists = place_.object(benchmark, "requests");
    const JsonPlace at = place_.nested("requests");
    std::vector<std::pair<double, BenchmarkRequest>> sent;  // epoch seconds, request
    for (const char* status : {"successful", "errored", "incomplete"}) {
      const json* list = at.optional(lists, status);
      if (list == nullptr)
        continue;
      if (!list->is_array())
        at.fail(status, "a list of GuideLLM's request records", json_shown(*list));
      for (std::size_t i = 0; i < list->size(); ++i)
        sent.push_back(request((*list)[i], at.nested(fmt::format("{}[{}]", status, i)), status));
    }
    if (sent.empty())
      at.fail("successful", "a list of at least one request", "no request in any list");
    // In the order they were sent; a failed request without a send time goes last.
    std::stable_sort(sent.begin(), sent.end(),
                     [](const auto& a, const auto& c) { return a.first < c.first; });
    const double first = sent.front().first;
    for (auto& [start, r] : sent) {
      if (std::isfinite(start))
        r.sent = static_cast<TimeNs>(std::llround((start - first) * 1e9));
      b.requests.push_back(std::move(r));
    }
    require_a_success(b, place_.nested("requests"));
    summary(benchmark, b);
    if (s.in_flight && *s.in_flight < static_cast<std::int64_t>(b.requests.size())) {
      b.notes.push_back(fmt::format(
          "GuideLLM's {} strategy kept at most {} request(s) in flight, sending one when another "
          "finished{}: replayed at the recorded send times, which do not move with the "
          "simulator's speed",
          s.name, *s.in_flight, s.rate ? " where its rate ran ahead" : " (a closed loop)"));
    }
    return b;
  }

 private:
  // One request record and its send time (+infinity for a failed one without).
  std::pair<double, BenchmarkRequest> request(const json& record, const JsonPlace& at,
                                              const std::string& status) const {
    if (!record.is_object())
      at.fail("", "an object (GuideLLM's request stats)", json_shown(record));
    const bool successful = status == "successful";
    BenchmarkRequest r;
    double start = std::numeric_limits<double>::infinity();
    const std::string start_expected =
        "the request's send time in epoch seconds, from 0 to 4e9 (the year 2096)";
    if (const json* value = at.optional(record, "request_start_time")) {
      start = at.number(*value, "request_start_time", start_expected);
      if (start < 0 || start > k_max_epoch_seconds)
        at.fail("request_start_time", start_expected, json_shown(*value));
    } else if (successful) {
      at.required(record, "request_start_time", start_expected);
      at.fail("request_start_time", start_expected, "null");
    }
    const json* prompt = at.optional(record, "prompt_tokens");
    if (prompt != nullptr || successful) {
      r.input_tokens = at.count(prompt ? *prompt : json(nullptr), "prompt_tokens", 1);
    }
    if (!successful) {
      r.failed = true;
      const json* info = at.optional(record, "info");
      const json* error = info && info->is_object() ? at.optional(*info, "error") : nullptr;
      r.failure = status == "incomplete"        ? "incomplete (cut off when the run ended)"
                  : error && error->is_string() ? failure_of(error->get<std::string>())
                                                : "errored";
      return {start, r};
    }
    if (const json* output = at.optional(record, "output_tokens"))
      r.output_tokens = at.count(*output, "output_tokens", 0);
    if (const json* ttft = at.optional(record, "time_to_first_token_ms")) {
      r.ttft = at.milliseconds(*ttft, "time_to_first_token_ms",
                               "a time to first token in ms, >= 0 and finite");
    }
    if (r.output_tokens > 1) {
      const std::string expected =
          "the request's mean inter-token latency in ms, >= 0 (it has several output tokens)";
      const json& itl = at.required(record, "inter_token_latency_ms", expected);
      const TimeNs gap = at.milliseconds(itl, "inter_token_latency_ms", expected);
      if (static_cast<double>(gap) * static_cast<double>(r.output_tokens - 1) >
          static_cast<double>(k_max_request_ns)) {
        at.fail("inter_token_latency_ms",
                fmt::format("a request streaming for at most {} s (a day)", k_max_seconds),
                fmt::format("{} ms x {} gaps", json_shown(itl), r.output_tokens - 1));
      }
      r.decode = gap * (r.output_tokens - 1);
    }
    check_request(r, at, "time_to_first_token_ms");
    return {start, r};
  }

  // GuideLLM's own figures over the successful requests, for the cross-check with the records:
  // the TTFT's and the mean inter-token latency's (exitsim's TPOT) mean and median.
  void summary(const json& benchmark, ServingBenchmark& b) const {
    const json* metrics = place_.optional(benchmark, "metrics");
    if (metrics == nullptr || !metrics->is_object())
      return;
    for (const char* metric : {"time_to_first_token_ms", "inter_token_latency_ms"}) {
      const auto m = metrics->find(metric);
      if (m == metrics->end() || !m->is_object())
        continue;
      const auto ok = m->find("successful");
      if (ok == m->end() || !ok->is_object())
        continue;
      for (const char* statistic : {"mean", "median"}) {
        const auto v = ok->find(statistic);
        if (v != ok->end() && v->is_number())
          b.summary[fmt::format("{}.{}", metric, statistic)] = v->get<double>();
      }
    }
  }

  JsonPlace place_;
};

}  // namespace

bool is_guidellm(const json& root) {
  const auto benchmarks = root.find("benchmarks");
  return benchmarks != root.end() && benchmarks->is_array() &&
         (root.contains("args") || root.contains("metadata"));
}

std::vector<ServingBenchmark> read_guidellm_runs(const json& root, const std::string& path) {
  const JsonPlace place(path, 0);
  const json& benchmarks = root.at("benchmarks");
  if (benchmarks.empty())
    place.fail("benchmarks", "a list of at least one GuideLLM benchmark", "[]");
  std::string backend;
  std::string model;
  if (const json* args = place.optional(root, "args"); args && args->is_object()) {
    const JsonPlace at = place.nested("args");
    backend = at.text(*args, "backend");
    model = at.text(*args, "model");
  }
  std::vector<ServingBenchmark> runs;
  for (std::size_t i = 0; i < benchmarks.size(); ++i) {
    runs.push_back(GuidellmRun(place.nested(fmt::format("benchmarks[{}]", i))).read(benchmarks[i]));
    runs.back().run = static_cast<int>(i + 1);
    runs.back().runs = static_cast<int>(benchmarks.size());
    runs.back().backend = backend;
    runs.back().model_id = model;
  }
  return runs;
}

}  // namespace exitsim::traces::benchmark_json
