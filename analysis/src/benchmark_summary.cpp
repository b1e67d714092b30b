// Summary-only serving-benchmark results: the figures their summaries carry under exitsim's
// names, and the requests a replay sends in their place (their lengths made up, and said so).
#include "benchmark_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "exitsim/core/error.hpp"
#include "exitsim/core/request.hpp"

namespace exitsim::analysis {
namespace {

// exitsim's figures in benchmark_figures' order.
std::vector<std::string> figure_names() {
  std::vector<std::string> names{"throughput_tokens_per_s", "throughput_requests_per_s"};
  for (const char* metric : {"ttft", "tpot", "itl", "e2e"}) {
    for (const char* statistic : {"mean", "p50", "p90", "p99"})
      names.push_back(fmt::format("{}_{}_ms", metric, statistic));
  }
  return names;
}

std::vector<std::pair<std::string, std::string>> make_keys() {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"output_throughput", "throughput_tokens_per_s"},
      {"request_throughput", "throughput_requests_per_s"},
      {"output_token_throughput.avg", "throughput_tokens_per_s"},
      {"request_throughput.avg", "throughput_requests_per_s"}};
  // vLLM's and SGLang's "<statistic>_<metric>_ms" (vllm/benchmarks/serve.py, SGLang's
  // bench_serving.py: e2el is vLLM's end-to-end latency, e2e_latency SGLang's).
  const std::pair<const char*, const char*> statistics[] = {
      {"mean", "mean"}, {"median", "p50"}, {"p90", "p90"}, {"p99", "p99"}};
  for (const auto& [metric, name] :
       std::initializer_list<std::pair<const char*, const char*>>{{"ttft", "ttft"},
                                                                  {"tpot", "tpot"},
                                                                  {"itl", "itl"},
                                                                  {"e2el", "e2e"},
                                                                  {"e2e_latency", "e2e"}}) {
    for (const auto& [statistic, as] : statistics)
      keys.emplace_back(fmt::format("{}_{}_ms", statistic, metric),
                        fmt::format("{}_{}_ms", name, as));
  }
  // AIPerf's "<tag>.<statistic>" (its inter_token_latency is (latency - ttft) / (osl - 1), a
  // request's TPOT; inter_chunk_latency every gap; request_latency send to last response).
  const std::pair<const char*, const char*> aiperf_statistics[] = {
      {"avg", "mean"}, {"p50", "p50"}, {"p90", "p90"}, {"p99", "p99"}};
  for (const auto& [tag, name] :
       std::initializer_list<std::pair<const char*, const char*>>{{"time_to_first_token", "ttft"},
                                                                  {"inter_token_latency", "tpot"},
                                                                  {"inter_chunk_latency", "itl"},
                                                                  {"request_latency", "e2e"}}) {
    for (const auto& [statistic, as] : aiperf_statistics)
      keys.emplace_back(fmt::format("{}.{}", tag, statistic), fmt::format("{}_{}_ms", name, as));
  }
  // GuideLLM's over its successful requests (its inter_token_latency_ms is a request's TPOT).
  keys.insert(keys.end(), {{"time_to_first_token_ms.mean", "ttft_mean_ms"},
                           {"time_to_first_token_ms.median", "ttft_p50_ms"},
                           {"inter_token_latency_ms.mean", "tpot_mean_ms"},
                           {"inter_token_latency_ms.median", "tpot_p50_ms"}});
  return keys;
}

bool judged(const std::string& name) {
  return name.starts_with("throughput") || name.ends_with("_p50_ms");
}

// A length from a file's mean: the nearest whole token, at least 1.
std::int64_t length_of(double mean) {
  return std::clamp<std::int64_t>(std::llround(mean), 1, k_max_request_tokens);
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& summary_figure_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = make_keys();
  return keys;
}

std::vector<NamedFigure> summary_figures(const traces::ServingBenchmark& benchmark) {
  std::vector<NamedFigure> out;
  for (const std::string& name : figure_names()) {
    for (const auto& [key, as] : summary_figure_keys()) {
      const auto it = benchmark.summary.find(key);
      if (as == name && it != benchmark.summary.end()) {
        out.push_back({name, it->second, judged(name)});
        break;
      }
    }
  }
  return out;
}

std::pair<traces::ServingBenchmark, std::string> with_reconstructed_requests(
    const traces::ServingBenchmark& benchmark, traces::RequestSource* lengths) {
  if (!benchmark.summary_only)
    return {benchmark, ""};
  const traces::BenchmarkSummaryCounts& c = *benchmark.summary_only;
  const bool from_workload = !c.mean_input_tokens || !c.mean_output_tokens;
  if (from_workload && lengths == nullptr) {
    throw InputError(
        SourceLocation{benchmark.path, benchmark.line, 0,
                       c.mean_input_tokens ? "total_output_tokens" : "total_input_tokens"},
        expected_found("the token totals a summary-only result's lengths are made from", "none"));
  }
  traces::ServingBenchmark out = benchmark;
  out.requests.clear();
  for (std::int64_t i = 0; i < c.sent; ++i) {
    traces::BenchmarkRequest r;
    if (from_workload) {
      const std::optional<RequestDescriptor> drawn = lengths->next();
      if (!drawn) {
        throw InputError(
            SourceLocation{"", 0, 0, "workload"},
            expected_found(fmt::format("at least {} requests, the summary-only result's count, "
                                       "to give their lengths",
                                       c.sent),
                           fmt::format("{}", i)));
      }
      r.input_tokens = drawn->input_tokens;
      r.output_tokens = std::max<std::int64_t>(1, drawn->output_tokens);
    }
    if (c.mean_input_tokens)
      r.input_tokens = length_of(*c.mean_input_tokens);
    if (c.mean_output_tokens)
      r.output_tokens = length_of(*c.mean_output_tokens);
    if (i >= c.completed) {
      r.failed = true;
      r.failure = "failed in the benchmark (which ones the summary does not say: the last taken)";
    }
    out.requests.push_back(std::move(r));
  }
  const auto fixed = [&](const char* what, double mean, const std::string& from) {
    return fmt::format("every {} fixed at the file's mean, {} tokens ({})", what, length_of(mean),
                       from);
  };
  const std::string drawn = fmt::format(
      "drawn from the scenario's workload section ({}: its first {} requests; the file gives no "
      "token totals)",
      from_workload ? lengths->format_name() : "", c.sent);
  std::string made;
  if (c.mean_input_tokens && c.mean_output_tokens) {
    made = fixed("prompt", *c.mean_input_tokens, c.mean_input_from) + "; " +
           fixed("output", *c.mean_output_tokens, c.mean_output_from);
  } else if (c.mean_input_tokens) {
    made = fixed("prompt", *c.mean_input_tokens, c.mean_input_from) + "; output lengths " + drawn;
  } else if (c.mean_output_tokens) {
    made = "prompt lengths " + drawn + "; " +
           fixed("output", *c.mean_output_tokens, c.mean_output_from);
  } else {
    made = "prompt and output lengths " + drawn;
  }
  std::string description = fmt::format(
      "lengths: not in the file (summary only): {}; the real spread of lengths is not known", made);
  if (c.completed < c.sent) {
    description += fmt::format(
        "; {} of {} requests failed in the benchmark: the last {} are not "
        "replayed (the file does not say which failed)",
        c.sent - c.completed, c.sent, c.sent - c.completed);
  }
  return {std::move(out), description};
}

}  // namespace exitsim::analysis
