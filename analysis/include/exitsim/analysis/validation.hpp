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

struct MetricComparison {
  std::string metric;  // "throughput_tokens_per_s", "ttft_p50_ms", ...
  double engine = 0;
  double simulated = 0;
  double relative_error = 0;  // |simulated - engine| / engine (0 when both are 0)
};

// One strategy's validation: iteration error and the request metrics of both executors.
struct ValidationResult {
  std::string strategy;
  // The engine's steps against the simulator's own run of the same requests (the schedules may
  // drift apart where the predicted times differ).
  IterationError iterations;
  // The engine's steps against the cost model's price of the very batch each step ran: the cost
  // model's error alone. Absent where the engine does not record its batches in the
  // simulator's terms (depth-wise steps, deferred fills).
  std::optional<IterationError> same_batches;
  std::vector<MetricComparison> metrics;  // throughput, then TTFT, TPOT, E2E at p50, p90, p99
};

ValidationResult compare_runs(const std::string& strategy, const sim::MetricsSummary& engine,
                              const sim::MetricsSummary& simulated,
                              std::span<const TimeNs> engine_iterations,
                              std::span<const TimeNs> simulated_iterations);

// The results as CSV (one row per strategy and metric, iteration errors as metrics too) and as
// readable text.
std::string validation_csv(std::span<const ValidationResult> results);
// The same as JSON (what `exitsim report` reads): {"strategies": [{"strategy", "iterations":
// {...}, "metrics": [{"metric", "engine", "simulated", "relative_error"}]}]}.
std::string validation_json(std::span<const ValidationResult> results);
std::string format_validation(std::span<const ValidationResult> results);

}  // namespace exitsim::analysis
