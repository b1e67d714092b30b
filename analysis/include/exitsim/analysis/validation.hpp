#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

// How far the simulator's iterations are from the engine's, matched one by one in order (the
// same requests, exit decisions, scheduler and strategy give the same sequence of batches).
struct IterationError {
  std::int64_t engine_iterations = 0;
  std::int64_t simulated_iterations = 0;
  std::int64_t matched = 0;  // min of the two
  double median_ape = 0;     // absolute percentage error of one iteration's time, as a fraction
  double p90_ape = 0;
  double engine_mean_us = 0;
  double simulated_mean_us = 0;
};

// Absolute percentage errors of the matched iterations; nearest-rank percentiles. Iterations the
// engine measured as 0 ns are skipped (no error is defined).
IterationError compare_iterations(std::span<const TimeNs> engine,
                                  std::span<const TimeNs> simulated);

// The targets a validation is judged against (docs/calibration.md): the cost model's error on the
// engine's own batches, the per-iteration error of the simulator's own run, and the request
// metrics' error (a metric also passes when the prediction lies inside the engine's own min-max
// over its repeats: closer than that, no run of the engine could confirm it).
struct ValidationTargets {
  double same_batch_median = 0.05;
  double iteration_median = 0.08;
  double metric = 0.05;  // throughput and the p50 of TTFT, TPOT and E2E
};

struct MetricComparison {
  std::string metric;  // "throughput_tokens_per_s", "ttft_p50_ms", ...
  double engine = 0;   // the median of the engine's runs
  double simulated = 0;
  double relative_error = 0;  // |simulated - engine| / engine (0 when both are 0)
  // The engine's own spread over its repeated runs (all equal to `engine` for one run).
  int engine_runs = 1;
  double engine_min = 0;
  double engine_max = 0;
  double engine_cv = 0;              // standard deviation / mean over the runs (0 for one run)
  bool inside_engine_range = false;  // engine_min <= simulated <= engine_max
  double target = 0;                 // 0: not judged
  bool pass = true;                  // error <= target, or inside the engine's range
  // The simulator's figure with every price off by ValidationResult::price_change either way
  // (lowest and highest of the three runs): how far the profile's measured precision alone
  // moves it. Equal to `simulated` without a band.
  double simulated_low = 0;
  double simulated_high = 0;
  // Against a serving benchmark (`validate --against`): the simulator ran once per arrival seed,
  // `simulated` is the median of those runs and these their lowest and highest figure (what
  // reconstructing the unknown arrivals costs). 0 seeds: one run, no spread.
  int simulated_seeds = 0;
  double simulated_seed_min = 0;
  double simulated_seed_max = 0;
  bool reference_inside_seed_range = false;  // seed_min <= engine (the benchmark) <= seed_max
  // The band's widest distance from `simulated`, relative to it (0 without a band).
  double price_sensitivity() const;
};

// |simulated - reference| / |reference|: 0 when both are 0, 1 when only the reference is.
double relative_error(double reference, double simulated);

// A figure over repeated runs: its lowest, its median (the lower middle of an even count, a
// value some run really gave), its highest, and its coefficient of variation (0 for one run).
struct RunSpread {
  double min = 0, median = 0, max = 0, cv = 0;
};
RunSpread spread_of_runs(std::vector<double> values);

// One strategy's validation: iteration error and the request metrics of both executors.
struct ValidationResult {
  std::string strategy;
  // What the simulator is compared with: "engine" (exitsim's own, iterations compared too) or
  // "benchmark" (a vLLM/SGLang result file: request metrics only; MetricComparison::engine holds
  // the benchmark's figure).
  std::string reference = "engine";
  // The engine's steps against the simulator's own run of the same requests (the schedules may
  // drift apart where the predicted times differ); of the engine run with the median error.
  IterationError iterations;
  // Each engine run's per-iteration median error, in run order.
  std::vector<double> iteration_median_by_run;
  // The engine's steps against the cost model's price of the very batch each step ran: the cost
  // model's error alone (of the run with the median error). Absent where the engine does not
  // record its batches in the simulator's terms (depth-wise steps, deferred fills).
  std::optional<IterationError> same_batches;
  std::vector<double> same_batch_median_by_run;
  // Throughput, then TTFT, TPOT, E2E and queueing at p50, p90, p99.
  std::vector<MetricComparison> metrics;
  ValidationTargets targets;
  bool pass = true;  // every judged figure within its target
  // The relative price change of the metrics' band (add_price_band): the same-batch median
  // error, the profile's measured precision on this machine now; 0: no band.
  double price_change = 0;
};

// One engine run, as validation compares it.
struct EngineRunMeasurement {
  sim::MetricsSummary summary;
  std::vector<TimeNs> iterations;
  // The engine's own steps priced by the cost model; empty where not recorded.
  std::vector<TimeNs> priced_steps;
};

// Compares the simulator's run with the engine's runs (at least one) of the same requests.
ValidationResult compare_runs(const std::string& strategy,
                              std::span<const EngineRunMeasurement> engine,
                              const sim::MetricsSummary& simulated,
                              std::span<const TimeNs> simulated_iterations,
                              const ValidationTargets& targets = {});

// Adds the band of the simulator's runs priced `change` lower and higher (cost_model.price_scale
// 1 -/+ change) to every metric of `result`.
void add_price_band(ValidationResult& result, double change, const sim::MetricsSummary& lower,
                    const sim::MetricsSummary& upper);

// How fast the machine was, by the speed probe (engine/op_timing.hpp): at calibration (from the
// profile; 0 when it has none), and at the start and end of this validation.
struct SpeedCheck {
  double calibration_us = 0;
  double start_us = 0;
  double end_us = 0;
  double tolerance = 0.10;  // a change beyond this fraction is reported
  bool normalized = false;  // --normalize-speed: the engine's times were rescaled by `factor`
  double factor = 1;        // calibration_us / start_us (the end reading comes after the runs)
  // The machine's speed now relative to calibration (+: slower now); 0 without a calibration
  // reading.
  double change() const;
  // One line: the three readings and whether the change is beyond the tolerance.
  std::string describe() const;
};

// How the engine was measured: the machine (with its thread setting), the runs per strategy, the
// warm-up, the OpenMP wait policy, the speed check.
// Against a serving benchmark: the file, what was compared and what could not be matched.
struct BenchmarkProvenance {
  std::string file;
  std::string format;     // "vllm", "sglang", "guidellm" or "aiperf"
  std::int64_t line = 0;  // the JSON Lines line read; 0: one document
  int run = 1;            // the run compared, of `runs` in the file (1-based)
  int runs = 1;
  std::string run_name;              // GuideLLM's strategy; else ""
  bool summary_only = false;         // the file has no per-request records: requests reconstructed
  std::string lengths;               // where the replayed lengths come from
  std::string prefix_cache = "off";  // --prefix-cache: off | warm
  std::string prompt_repetition;     // warm: what was recognised
  std::string backend, model_id, tokenizer_id, date;
  std::string scenario_model;  // the scenario's model name, to compare with model_id
  std::string request_rate;    // as the file gives it ("inf" or the number; "recorded")
  double burstiness = 1;
  std::int64_t requests_in_file = 0;
  std::int64_t requests_compared = 0;
  std::int64_t excluded_failed = 0;
  std::vector<std::uint64_t> arrival_seeds;
  std::string arrivals;  // how the arrivals were reconstructed
  std::optional<std::int64_t> max_concurrency;
  bool max_concurrency_ignored = false;
  // validate --overlay: the file of scenario sections laid over the scenario for the second
  // comparison ("" without one).
  std::string overlay;
  // What could not be matched or was assumed, one line each (also printed).
  std::vector<std::string> unmatched;
};

struct ValidationConditions {
  std::string hardware;
  int repeats = 1;
  int warmup_requests = 0;
  std::string omp_wait_policy = "default";
  SpeedCheck speed;
  // Set by `validate --against`: written as "against" (engine-only fields are left out).
  std::optional<BenchmarkProvenance> against;
};

// The results as CSV (one row per strategy and metric, iteration errors as metrics too) and as
// readable text.
std::string validation_csv(std::span<const ValidationResult> results);
// The same as JSON (what `exitsim report` reads): {"format", "hardware", "repeats",
// "warmup_requests", "omp_wait_policy", "speed": {...},
// "strategies": [{"strategy", "pass", "targets", "iterations": {...}, "same_batches": {...},
// "metrics": [{"metric", "engine", "engine_min", "engine_max", "engine_cv", "simulated",
// "relative_error", "inside_engine_range", "target", "pass", and with a price band
// "simulated_low", "simulated_high"}], "price_change"}]}. Against a benchmark (conditions.against
// set): {"format", "hardware", "against": {file, format, ..., "unmatched": [...]}, "strategies":
// [{"strategy", "reference", "pass", "targets", "metrics": [{"metric", "benchmark", "simulated",
// "simulated_seeds", "simulated_seed_min", "simulated_seed_max", "relative_error",
// "benchmark_inside_seed_range", "target", "pass"}]}]}.
std::string validation_json(std::span<const ValidationResult> results,
                            const ValidationConditions& conditions);
std::string format_validation(std::span<const ValidationResult> results);

}  // namespace exitsim::analysis
