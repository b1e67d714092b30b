// vLLM's and SGLang's serving-benchmark results, one run each (a vLLM file, an SGLang JSON Lines
// line). Their fields and units are those of vllm-project/vllm vllm/benchmarks/serve.py (`vllm
// bench serve`; the older benchmarks/benchmark_serving.py writes the same keys) and of
// sgl-project/sglang python/sglang/bench_serving.py: per-request input_lens, output_lens, ttfts
// (seconds), itls (a list of lists of seconds) and errors; duration in seconds; request_rate a
// number or "inf". Without the per-request lists (vLLM's nightly format, no --save-detailed or
// --output-details) a run is summary-only: its counts, token totals and figures.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>

#include "benchmark_json.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces::benchmark_json {
namespace {

// One run of vLLM or SGLang: one JSON object.
class VllmSglangRun {
 public:
  explicit VllmSglangRun(JsonPlace place) : place_(std::move(place)) {}

  ServingBenchmark read(const json& root) {
    ServingBenchmark b;
    b.path = place_.path();
    b.line = place_.line();
    if (!root.is_object())
      place_.fail("", "a JSON object of a vLLM or SGLang benchmark result", json_shown(root));
    b.format = detect(root);
    b.backend = place_.text(root, "backend");
    b.model_id = place_.text(root, "model_id");
    b.tokenizer_id = place_.text(root, "tokenizer_id");
    b.date = place_.text(root, "date");
    for (const auto& [key, value] : root.items()) {
      if (value.is_number() && (key.ends_with("_ms") || key.ends_with("throughput")))
        b.summary[key] = value.get<double>();
    }
    if (is_summary_only(root, b))
      b.summary_only = summary_counts(root);
    traffic(root, b);
    if (!b.summary_only)
      requests(root, b);
    return b;
  }

 private:
  ServingBenchmarkFormat detect(const json& root) const {
    if (root.contains("resourceSpans")) {
      place_.fail("resourceSpans", "a serving benchmark's result (vLLM, SGLang, GuideLLM, AIPerf)",
                  "OpenTelemetry spans (OTLP JSON), which exitsim does not read: give the result "
                  "of the benchmark run they were recorded under");
    }
    if (root.contains("model_id") || root.contains("burstiness"))
      return ServingBenchmarkFormat::vllm;
    if (root.contains("server_info") || root.contains("mean_e2e_latency_ms") ||
        root.contains("total_output_tokens_retokenized"))
      return ServingBenchmarkFormat::sglang;
    place_.fail("",
                "a vLLM result (with model_id or burstiness), an SGLang one (with server_info), "
                "a GuideLLM report (with benchmarks) or an AIPerf export (with metadata and "
                "metrics, or input_config)",
                "none of them");
  }

  // A result saved without its per-request lists (vLLM's nightly format, `vllm bench serve`
  // without --save-detailed, SGLang without --output-details) carries summary figures only.
  static bool is_summary_only(const json& root, const ServingBenchmark& b) {
    for (const char* list : {"input_lens", "output_lens", "ttfts", "itls"}) {
      if (root.contains(list))
        return false;  // a detailed result; a missing list is named where it is read
    }
    return !b.summary.empty();
  }

  std::int64_t request_count(const json& value, const std::string& key, std::int64_t least) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < least)
      place_.fail(key, fmt::format("an integer >= {} (requests)", least), json_shown(value));
    return value.get<std::int64_t>();
  }

  BenchmarkSummaryCounts summary_counts(const json& root) const {
    BenchmarkSummaryCounts c;
    const json* sent = place_.optional(root, "num_prompts");
    const json* completed = place_.optional(root, "completed");
    if (sent == nullptr && completed == nullptr) {
      place_.fail("num_prompts",
                  "the number of requests sent (num_prompts, else completed): a summary-only "
                  "result's requests are reconstructed from it",
                  "none");
    }
    if (sent != nullptr)
      c.sent = request_count(*sent, "num_prompts", 1);
    c.completed = completed != nullptr ? request_count(*completed, "completed", 0) : c.sent;
    if (sent == nullptr)
      c.sent = c.completed;
    if (c.completed > c.sent) {
      place_.fail("completed", fmt::format("at most num_prompts ({})", c.sent),
                  fmt::format("{}", c.completed));
    }
    if (c.completed == 0)
      place_.fail("completed", "at least one completed request to compare", "0");
    const auto mean = [&](const char* key) -> std::optional<double> {
      const json* total = place_.optional(root, key);
      if (total == nullptr)
        return std::nullopt;
      const double t = place_.number(*total, key, "a token count >= 0");
      if (t < 0)
        place_.fail(key, "a token count >= 0", json_shown(*total));
      return t / static_cast<double>(c.completed);
    };
    c.mean_input_tokens = mean("total_input_tokens");
    c.mean_output_tokens = mean("total_output_tokens");
    c.mean_input_from = fmt::format("total_input_tokens / {} completed", c.completed);
    c.mean_output_from = fmt::format("total_output_tokens / {} completed", c.completed);
    c.dataset = place_.text(root, "dataset_name");
    return c;
  }

  void traffic(const json& root, ServingBenchmark& b) const {
    const std::string rate_expected = "a request rate (a number > 0 or \"inf\")";
    const json& rate = place_.required(root, "request_rate", rate_expected);
    if (rate.is_string() && rate.get<std::string>() == "inf") {
      b.request_rate.reset();
    } else if (rate.is_string() && rate.get<std::string>() == "trace") {
      place_.fail("request_rate",
                  rate_expected + "; arrivals from a trace's timestamps are not reconstructed",
                  "\"trace\"");
    } else {
      const double r = place_.number(rate, "request_rate", rate_expected);
      if (!(r > 0))
        place_.fail("request_rate", rate_expected, json_shown(rate));
      b.request_rate = r;
    }
    if (const json* burstiness = place_.optional(root, "burstiness")) {
      const std::string expected = "a burstiness > 0 (the gamma shape)";
      if (burstiness->is_string() && burstiness->get<std::string>() == "inf") {
        b.burstiness = std::numeric_limits<double>::infinity();
      } else {
        const double v = place_.number(*burstiness, "burstiness", expected);
        if (!(v > 0))
          place_.fail("burstiness", expected, json_shown(*burstiness));
        b.burstiness = v;
      }
    } else {
      b.burstiness_given = false;
    }
    if (const json* ramp = place_.optional(root, "ramp_up_strategy")) {
      place_.fail("ramp_up_strategy",
                  "null (a request rate that ramps up is not reconstructed; rerun without "
                  "--ramp-up-strategy)",
                  json_shown(*ramp));
    }
    if (const json* limit = place_.optional(root, "max_concurrency")) {
      if (!limit->is_number_integer() || limit->get<std::int64_t>() < 1)
        place_.fail("max_concurrency", "null or an integer >= 1", json_shown(*limit));
      b.max_concurrency = limit->get<std::int64_t>();
    }
    const std::string expected = "the benchmark's duration in seconds > 0";
    const json* duration = place_.optional(root, "duration");
    if (duration == nullptr && b.summary_only)
      return;  // vLLM's nightly format gives none: the throughput figures stand for it
    if (duration == nullptr)
      place_.required(root, "duration", expected);
    b.duration_s = place_.number(*duration, "duration", expected);
    if (!(b.duration_s > 0))
      place_.fail("duration", expected, json_shown(*duration));
  }

  // A list of `n` entries (n = the first list's size when n < 0).
  const json& list(const json& root, const std::string& key, std::int64_t n) const {
    const std::string expected =
        "a list of one entry per request (saved with --save-detailed or --output-details)";
    const json& value = place_.required(root, key, expected);
    if (!value.is_array())
      place_.fail(key, expected, json_shown(value));
    if (value.empty())
      place_.fail(key, "a list of at least one request", "[]");
    if (n >= 0 && static_cast<std::int64_t>(value.size()) != n) {
      place_.fail(key, fmt::format("{} entries, as many as input_lens", n),
                  fmt::format("{}", value.size()));
    }
    return value;
  }

  void gaps(const json& itls, std::int64_t i, BenchmarkRequest& r) const {
    const auto u = static_cast<std::size_t>(i);
    const json& gaps = itls[u];
    if (!gaps.is_array())
      place_.fail(fmt::format("itls[{}]", i), "a list of numbers (seconds)", json_shown(gaps));
    TimeNs streamed = r.ttft;
    for (std::size_t k = 0; k < gaps.size(); ++k) {
      const std::string key = fmt::format("itls[{}][{}]", i, k);
      r.itls.push_back(
          place_.seconds(gaps[k], key, "an inter-token latency in seconds, >= 0 and finite"));
      streamed += r.itls.back();
      r.decode += r.itls.back();
      if (streamed > benchmark_json::k_max_request_ns) {
        place_.fail(key,
                    fmt::format("ttfts[{}] plus itls[{}] of at most {} s (a day)", i, i,
                                benchmark_json::k_max_seconds),
                    fmt::format("{:.3f} s by this gap", to_seconds(streamed)));
      }
    }
  }

  void requests(const json& root, ServingBenchmark& b) const {
    const json& inputs = list(root, "input_lens", -1);
    const auto n = static_cast<std::int64_t>(inputs.size());
    const json& outputs = list(root, "output_lens", n);
    const json& ttfts = list(root, "ttfts", n);
    const json& itls = list(root, "itls", n);
    const json* errors = nullptr;
    if (place_.optional(root, "errors") != nullptr)
      errors = &list(root, "errors", n);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto at = [&](const char* key) { return fmt::format("{}[{}]", key, i); };
      const auto u = static_cast<std::size_t>(i);
      BenchmarkRequest r;
      r.input_tokens = place_.count(inputs[u], at("input_lens"), 1);
      r.output_tokens = place_.count(outputs[u], at("output_lens"), 0);
      r.ttft = place_.seconds(ttfts[u], at("ttfts"),
                              "a time to first token in seconds, >= 0 and finite");
      if (errors) {
        const json& e = (*errors)[u];
        if (!e.is_null() && !e.is_string())
          place_.fail(at("errors"), "a string (empty: no error) or null", json_shown(e));
        if (e.is_string() && !e.get<std::string>().empty()) {
          r.failed = true;
          r.failure = benchmark_json::failure_of(e.get<std::string>());
        }
      }
      gaps(itls, i, r);
      benchmark_json::check_request(r, place_, at("ttfts"));
      if (!r.failed && static_cast<std::int64_t>(r.itls.size()) > r.output_tokens - 1) {
        place_.fail(at("itls"),
                    fmt::format("at most output_lens[{}] - 1 = {} gaps (one per streamed chunk "
                                "after the first)",
                                i, r.output_tokens - 1),
                    fmt::format("{}", r.itls.size()));
      }
      b.requests.push_back(std::move(r));
    }
    benchmark_json::require_a_success(b, place_);
  }

  JsonPlace place_;
};

}  // namespace

ServingBenchmark read_vllm_sglang_run(const json& root, const std::string& path,
                                      std::int64_t line) {
  return VllmSglangRun(JsonPlace(path, line)).read(root);
}

}  // namespace exitsim::traces::benchmark_json
