#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/request_source.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::analysis {

// `exitsim validate --against`: the simulator replays a serving benchmark's requests (docs/
// calibration.md, "Validate against a serving benchmark").

// The send times of the file's requests (all of them, failed ones too, in file order), relative
// to the first, as the benchmark drew them, from the stream seeded with `seed`:
// - recorded in the file (GuideLLM, AIPerf's records: ServingBenchmark::arrivals_recorded): those,
//   whatever the seed (a failed request without one at 0: it is not replayed);
// - vLLM (vllm/benchmarks/serve.py get_request): gaps drawn from a gamma distribution of shape
//   `burstiness` and mean 1/request_rate (burstiness 1: Poisson; infinite: even gaps), summed,
//   the sums rescaled so that the last is num_requests / request_rate;
// - SGLang (python/sglang/bench_serving.py get_request) and AIPerf's summary (its
//   request_rate_mode poisson or constant): the first at 0, then exponential gaps of mean 1/rate
//   (even gaps for an infinite burstiness);
// - request_rate "inf": every request at time 0.
std::vector<TimeNs> benchmark_arrivals(const traces::ServingBenchmark& benchmark,
                                       std::uint64_t seed);

struct NamedFigure {
  std::string name;  // "throughput_tokens_per_s", "ttft_p50_ms", ...
  double value = 0;
  bool judged = false;  // against ValidationTargets::metric: throughput and the p50s
};

// The benchmark's figures, in order: output tokens/s and requests/s, then TTFT, TPOT, ITL and
// E2E at mean, p50, p90 and p99 (ms), each only where the file gives it. From the per-request
// records of the successful requests: percentiles by nearest rank (core::nearest_rank, as
// exitsim's metrics define them), E2E = ttft + decode (the sum of the itls), TPOT = decode /
// (output_len - 1) for output_len > 1, ITL over every recorded gap (none where the file records
// only each request's mean gap: GuideLLM), throughput over the file's duration. A summary-only
// run: the figures of its summary under exitsim's names (summary_figure_keys), nothing else.
std::vector<NamedFigure> benchmark_figures(const traces::ServingBenchmark& benchmark);
std::vector<NamedFigure> simulated_figures(const sim::MetricsSummary& summary);

// A result's summary keys and the figure of exitsim's each stands for: vLLM's and SGLang's
// ("median_ttft_ms" -> "ttft_p50_ms", "output_throughput" -> "throughput_tokens_per_s", p90 and
// p99 too), AIPerf's ("time_to_first_token.p50"; its inter_token_latency is exitsim's TPOT, its
// inter_chunk_latency the ITL, its request_latency the E2E) and GuideLLM's
// ("time_to_first_token_ms.median"; its inter_token_latency_ms is exitsim's TPOT).
const std::vector<std::pair<std::string, std::string>>& summary_figure_keys();

// A summary-only run (ServingBenchmark::summary_only) with requests to replay, made from its
// counts: `sent` requests, of which the last sent - completed are marked failed (the file does
// not say which failed); lengths fixed at the file's mean input and output tokens (rounded to
// the nearest token, at least 1) where it gives them, else taken in order from `lengths` (the
// scenario's workload; null: refused naming the file's missing totals). Returns the run and one
// line saying how its lengths were made.
std::pair<traces::ServingBenchmark, std::string> with_reconstructed_requests(
    const traces::ServingBenchmark& benchmark, traces::RequestSource* lengths);

// Where the file's own summary (median_ttft_ms, mean_*_ms, output_throughput, ...) differs from
// the figure computed from its per-request lists by more than `tolerance`, one line each.
std::vector<std::string> summary_cross_checks(const traces::ServingBenchmark& benchmark,
                                              double tolerance = 0.01);

// The benchmark's successful requests whose first token came sooner than their prompt can be
// computed: the FLOPs of prefilling it (the roofline's count for `model`) at `hardware`'s peak for
// the model's dtype on all `tensor_parallel` GPUs, with nothing else to do. Only a server that
// reused the prompts' cached prefixes (prefix caching, with prompts the benchmark repeated) gets
// there; the simulator, replaying them as computed, prices their TTFT far higher. One line naming
// how many requests and the plainest one, or nothing when no request is below its floor. The line
// ends with what the replay does with those prompts (`replay`).
enum class PromptReplay {
  computed,         // validate --against without --prefix-cache warm: the line says to try it
  warm,             // validate --against --prefix-cache warm
  computed_in_fit,  // calibrate --against, which replays every prompt computed
};
std::vector<std::string> warm_prefix_cache_evidence(const traces::ServingBenchmark& benchmark,
                                                    const ModelShape& model,
                                                    const HardwareSpec& hardware,
                                                    int tensor_parallel, PromptReplay replay);

// The benchmark's own repetition of prompts, as far as its records show it (they carry no prompt
// text): the input lengths of all its requests, in the order sent, repeating with a period p
// (length[i] = length[i - p] for every i >= p, the smallest such p < n), as a benchmark that
// cycles through its prompt list sends them. Request i is then taken as a repeat of request
// i mod p. Nothing is recognised when no period exists, or when every prompt of the first period
// has the same length (a fixed-length random dataset: its prompts differ, lengths cannot tell).
struct PromptRepetition {
  std::int64_t period = 0;              // 0: nothing recognised
  std::vector<std::size_t> first_sent;  // per request: the request whose prompt it is
  std::int64_t repeats = 0;             // requests taken as repeats of an earlier one
  std::string description;              // what was recognised, or why nothing was
};
PromptRepetition recognise_prompt_repetition(const traces::ServingBenchmark& benchmark);

// Refuses a benchmark run with a closed client limit (max_concurrency), which the simulator's open
// workload does not model, unless `ignore_max_concurrency` (--ignore-max-concurrency) says to
// compare it anyway.
void check_open_workload(const traces::ServingBenchmark& benchmark, bool ignore_max_concurrency);

// The simulator's run of the benchmark's successful requests (lengths in file order) arriving at
// `arrivals` (benchmark_arrivals), on `scenario` (its workload section is not used). With
// `repetition` (--prefix-cache warm; the scenario needs scheduler.prefix_caching), each
// request's prompt is named in blocks of the scheduler's block size by the request it repeats,
// so that a repeat finds the first one's blocks cached (where they were not evicted).
sim::MetricsSummary simulate_benchmark(const scenario::Scenario& scenario,
                                       const traces::ServingBenchmark& benchmark,
                                       std::span<const TimeNs> arrivals,
                                       const PromptRepetition* repetition = nullptr);

// The benchmark's figures against the simulator's runs (one per arrival seed, at least one), by
// name (each benchmark figure must be one simulated_figures names): each metric's simulated figure
// is the median over the runs (the lower middle for an even count) with their min and max; a judged
// figure passes within the target or when the benchmark's figure lies inside the runs' range.
ValidationResult compare_with_benchmark(const std::string& strategy,
                                        std::span<const NamedFigure> benchmark,
                                        std::span<const sim::MetricsSummary> simulated,
                                        const ValidationTargets& targets = {});

}  // namespace exitsim::analysis
