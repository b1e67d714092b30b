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
//   --save-detailed (vllm-project/vllm, vllm/benchmarks/serve.py and
//   benchmarks/benchmark_serving.py): one JSON object;
// - SGLang: `python -m sglang.bench_serving --output-file F --output-details`
//   (sgl-project/sglang, python/sglang/bench_serving.py): JSON Lines, one object appended per
//   run; the last line is read.
// Times in both files are in seconds (ttfts, itls), durations in seconds, summaries in ms.
enum class ServingBenchmarkFormat { vllm, sglang };

std::string format_name(ServingBenchmarkFormat format);

// One request of the benchmark, in the file's order (the order it was sent in).
struct BenchmarkRequest {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;  // the benchmark's count (0 for a failed request)
  TimeNs ttft = 0;
  // The gaps between streamed chunks after the first: at most output_tokens - 1 of them (fewer
  // where the server sent several tokens in one chunk).
  std::vector<TimeNs> itls;
  // Excluded from the comparison: the file's error text is not empty, no output token was
  // counted, or no first token was timed (ttft 0). `failure` says which.
  bool failed = false;
  std::string failure;
};

struct ServingBenchmark {
  std::string path;
  ServingBenchmarkFormat format = ServingBenchmarkFormat::vllm;
  std::int64_t line = 0;   // the JSON Lines line read (1-based); 0: the file is one document
  std::int64_t lines = 0;  // the runs the file holds (JSON Lines), else 1
  std::string backend;
  std::string model_id;  // vLLM's model_id; SGLang writes none ("")
  std::string tokenizer_id;
  std::string date;
  std::optional<double> request_rate;  // requests/s; absent: "inf" (all sent at once)
  double burstiness = 1;               // gamma shape of the gaps; +infinity: even gaps
  bool burstiness_given = true;        // false: the file has none (Poisson assumed)
  std::optional<std::int64_t> max_concurrency;
  double duration_s = 0;
  std::vector<BenchmarkRequest> requests;
  // The file's own numeric summary figures, by key ("median_ttft_ms", "output_throughput", ...).
  std::map<std::string, double> summary;

  std::int64_t failed_requests() const;
};

// Reads a vLLM or SGLang result (the format told by its fields: vLLM's model_id or burstiness,
// SGLang's server_info, mean_e2e_latency_ms or total_output_tokens_retokenized). Python's bare
// Infinity and NaN tokens are read as the strings "inf" and "nan". Throws InputError naming
// `path` and the key path ("itls[3]: expected a list of numbers, found \"x\"") for every break.
ServingBenchmark read_serving_benchmark(const std::string& path);

}  // namespace exitsim::traces
