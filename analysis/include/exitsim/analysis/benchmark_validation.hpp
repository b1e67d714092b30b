#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::analysis {

// `exitsim validate --against`: the simulator replays a serving benchmark's requests (docs/
// calibration.md, "Validate against a serving benchmark").

// The send times of the file's requests (all of them, failed ones too, in file order), relative
// to the first, as the benchmark drew them, from the stream seeded with `seed`:
// - vLLM (vllm/benchmarks/serve.py get_request): gaps drawn from a gamma distribution of shape
//   `burstiness` and mean 1/request_rate (burstiness 1: Poisson; infinite: even gaps), summed,
//   the sums rescaled so that the last is num_requests / request_rate;
// - SGLang (python/sglang/bench_serving.py get_request): exponential gaps of mean 1/rate;
// - request_rate "inf": every request at time 0.
std::vector<TimeNs> benchmark_arrivals(const traces::ServingBenchmark& benchmark,
                                       std::uint64_t seed);

struct NamedFigure {
  std::string name;  // "throughput_tokens_per_s", "ttft_p50_ms", ...
  double value = 0;
  bool judged = false;  // against ValidationTargets::metric: throughput and the p50s
};

// The compared figures, in order: output tokens/s and requests/s, then TTFT, TPOT, ITL and E2E
// at mean, p50, p90 and p99 (ms). From the benchmark's successful requests: percentiles of the
// per-request values by nearest rank (sim::nearest_rank, as exitsim's metrics define them), E2E
// = ttft + the sum of the itls, TPOT = (E2E - ttft) / (output_len - 1) for output_len > 1,
// throughput over the file's duration.
std::vector<NamedFigure> benchmark_figures(const traces::ServingBenchmark& benchmark);
std::vector<NamedFigure> simulated_figures(const sim::MetricsSummary& summary);

// Where the file's own summary (median_ttft_ms, mean_*_ms, output_throughput, ...) differs from
// the figure computed from its per-request lists by more than `tolerance`, one line each.
std::vector<std::string> summary_cross_checks(const traces::ServingBenchmark& benchmark,
                                              double tolerance = 0.01);

// The benchmark's successful requests whose first token came sooner than their prompt can be
// computed: the FLOPs of prefilling it (the roofline's count for `model`) at `hardware`'s peak for
// the model's dtype on all `tensor_parallel` GPUs, with nothing else to do. Only a server that
// reused the prompts' cached prefixes (prefix caching, with prompts the benchmark repeated) gets
// there; the simulator, replaying them as computed, prices their TTFT far higher. One line naming
// how many requests and the plainest one, or nothing when no request is below its floor.
std::vector<std::string> warm_prefix_cache_evidence(const traces::ServingBenchmark& benchmark,
                                                    const ModelShape& model,
                                                    const HardwareSpec& hardware,
                                                    int tensor_parallel);

// Refuses a benchmark run with a closed client limit (max_concurrency), which the simulator's open
// workload does not model, unless `ignore_max_concurrency` (--ignore-max-concurrency) says to
// compare it anyway.
void check_open_workload(const traces::ServingBenchmark& benchmark, bool ignore_max_concurrency);

// The simulator's run of the benchmark's successful requests (lengths in file order) arriving at
// `arrivals` (benchmark_arrivals), on `scenario` (its workload section is not used).
sim::MetricsSummary simulate_benchmark(const scenario::Scenario& scenario,
                                       const traces::ServingBenchmark& benchmark,
                                       std::span<const TimeNs> arrivals);

// The benchmark's figures against the simulator's runs (one per arrival seed, at least one):
// each metric's simulated figure is the median over the runs (the lower middle for an even
// count) with their min and max; a judged figure passes within the target or when the
// benchmark's figure lies inside the runs' range.
ValidationResult compare_with_benchmark(const std::string& strategy,
                                        std::span<const NamedFigure> benchmark,
                                        std::span<const sim::MetricsSummary> simulated,
                                        const ValidationTargets& targets = {});

}  // namespace exitsim::analysis
