#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/time.hpp"

namespace exitsim::traces {

// The result file of a serving benchmark, as `exitsim validate --against` compares it with the
// simulator (docs/calibration.md, "Validate against a serving benchmark"):
// - vLLM: `vllm bench serve` / benchmarks/benchmark_serving.py with --save-result
//   (vllm-project/vllm, vllm/benchmarks/serve.py and benchmarks/benchmark_serving.py): one JSON
//   object, with per-request lists under --save-detailed, else summary figures only (as vLLM's
//   nightly benchmarks write too);
// - SGLang: `python -m sglang.bench_serving --output-file F` (sgl-project/sglang,
//   python/sglang/bench_serving.py): JSON Lines, one object appended per run, with per-request
//   lists under --output-details;
// - GuideLLM (vllm-project/guidellm, src/guidellm/schemas/request_stats.py): one JSON object,
//   one run per entry of "benchmarks", each request's send time, lengths, TTFT and mean
//   inter-token latency under requests.successful / errored / incomplete;
// - NVIDIA AIPerf (ai-dynamo/aiperf, aiperf/common/models/record_models.py and
//   export_models.py): profile_export.jsonl (one record per request: its send time, lengths,
//   TTFT and inter-chunk gaps) or profile_export_aiperf.json (summary figures only).
// vLLM's and SGLang's times are in seconds (ttfts, itls, duration) and their summaries in ms;
// GuideLLM's and AIPerf's per-request times are in ms, their send times epoch seconds and
// nanoseconds.
enum class ServingBenchmarkFormat { vllm, sglang, guidellm, aiperf };

std::string format_name(ServingBenchmarkFormat format);

// One request of the benchmark, in the order it was sent in.
struct BenchmarkRequest {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;  // the benchmark's count (0 for a failed request)
  TimeNs ttft = 0;
  // The gaps between streamed chunks after the first: at most output_tokens - 1 of them (fewer
  // where the server sent several tokens in one chunk). Empty where the file records none
  // (GuideLLM: ServingBenchmark::gaps_recorded is false).
  std::vector<TimeNs> itls;
  // From the first token to the last: the sum of `itls`, or GuideLLM's inter_token_latency_ms
  // times output_tokens - 1.
  TimeNs decode = 0;
  // When it was sent, relative to the run's first request (GuideLLM's request_start_time,
  // AIPerf's request_start_ns); absent where the file records no send times (vLLM, SGLang).
  std::optional<TimeNs> sent;
  // Excluded from the comparison: the file's error text is not empty, no output token was
  // counted, or no first token was timed (ttft 0). `failure` says which.
  bool failed = false;
  std::string failure;
};

// What a summary-only result (no per-request lists) says of the requests it sent.
struct BenchmarkSummaryCounts {
  std::int64_t sent = 0;       // num_prompts (AIPerf: request_count plus error_request_count)
  std::int64_t completed = 0;  // "completed" (AIPerf: request_count); `sent` when not given
  // The mean prompt and output lengths of the completed requests (total_input_tokens /
  // completed, ...; AIPerf: input_sequence_length.avg); absent when the file has no totals.
  std::optional<double> mean_input_tokens;
  std::optional<double> mean_output_tokens;
  // Where each mean comes from ("total_input_tokens / 48 completed",
  // "input_sequence_length.avg"), for the output.
  std::string mean_input_from;
  std::string mean_output_from;
  std::string dataset;  // dataset_name, "" when not named
};

// One run of a benchmark: the whole file for vLLM, one JSON Lines line of SGLang, one entry of
// GuideLLM's "benchmarks", one AIPerf export.
struct ServingBenchmark {
  std::string path;
  ServingBenchmarkFormat format = ServingBenchmarkFormat::vllm;
  std::int64_t line = 0;  // the JSON Lines line read (1-based); 0: the file is one document
  int run = 1;            // this run's number among the file's runs (1-based)
  int runs = 1;           // the runs the file holds
  std::string run_name;   // GuideLLM: its strategy ("constant at 1.952 req/s"); else ""
  std::string backend;
  std::string model_id;  // vLLM's model_id; SGLang writes none ("")
  std::string tokenizer_id;
  std::string date;
  std::optional<double> request_rate;  // requests/s; absent: "inf" (all sent at once)
  double burstiness = 1;               // gamma shape of the gaps; +infinity: even gaps
  bool burstiness_given = true;        // false: the file has none (Poisson assumed)
  std::optional<std::int64_t> max_concurrency;
  double duration_s = 0;  // 0 where a summary-only result gives none
  // Empty for a summary-only result (`summary_only` set).
  std::vector<BenchmarkRequest> requests;
  bool gaps_recorded = true;  // false: each request's mean gap only (GuideLLM)
  std::optional<BenchmarkSummaryCounts> summary_only;
  // The file's own numeric summary figures, by key ("median_ttft_ms", "output_throughput", ...;
  // AIPerf's by metric and statistic, "time_to_first_token.p50").
  std::map<std::string, double> summary;
  // What the reader knows of how the run was driven that a replay cannot match (a GuideLLM
  // strategy that sent each request when another finished), one line each.
  std::vector<std::string> notes;

  std::int64_t failed_requests() const;
  // Whether every request's send time is in the file (GuideLLM, AIPerf's records).
  bool arrivals_recorded() const;
};

// Every run the file holds, in file order: one for a vLLM result or an AIPerf export, each
// JSON Lines line of SGLang, each entry of GuideLLM's "benchmarks". The format is told by the
// fields (vLLM's model_id or burstiness; SGLang's server_info, mean_e2e_latency_ms or
// total_output_tokens_retokenized; GuideLLM's "benchmarks"; AIPerf's "metadata" and "metrics"
// records or its "input_config" summary). Python's bare Infinity and NaN tokens are read as the
// strings "inf" and "nan". Throws InputError naming `path` (and the line of JSON Lines) and the
// key path ("itls[3]: expected a list of numbers, found \"x\"";
// "benchmarks[2].requests.successful[5].prompt_tokens: ...") for every break in any run.
std::vector<ServingBenchmark> read_serving_benchmark_runs(const std::string& path);

// The file's last run (read_serving_benchmark_runs(path).back()).
ServingBenchmark read_serving_benchmark(const std::string& path);

}  // namespace exitsim::traces
