#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::analysis {

// `exitsim calibrate --against`: the roofline's named parameters fitted to a deployment's own
// serving-benchmark runs at several request rates, each run replayed as `validate --against`
// replays it (docs/calibration.md, "Fit to your own benchmark runs").

// Every run the result files hold, in the order given (traces::read_serving_benchmark_runs: each
// SGLang JSON Lines line, each GuideLLM benchmark; a vLLM result or an AIPerf export is one run).
std::vector<traces::ServingBenchmark> read_benchmark_runs(std::span<const std::string> paths);

struct BenchmarkFitOptions {
  // The request rate whose runs are held out (+infinity: "inf"); nullopt: the highest.
  std::optional<double> hold_out_rate;
  // Arrival draws per run whose arrivals are random (as validate's --arrival-seeds); one where
  // they are fixed (request_rate inf, or even gaps).
  int arrival_seeds = 3;
  // The search simulates the first this many requests of each run (0: all of them).
  std::int64_t search_requests = 1000;
  // Fit runs that held at most max_concurrency requests in flight anyway (as validate's
  // --ignore-max-concurrency); refused otherwise.
  bool ignore_max_concurrency = false;
  // Called after each evaluation (every fitting run simulated once per seed) with their count.
  std::function<void(std::int64_t evaluations)> on_evaluation;
};

// One judged figure of one run: measured, and simulated (the arrival seeds' median) on the
// scenario as given and with the fitted values.
struct FitFigure {
  std::string name;  // "throughput_tokens_per_s", "ttft_p50_ms", ...
  double measured = 0, before = 0, after = 0;
};

struct FitRun {
  std::string file;
  std::optional<double> request_rate;  // nullopt: inf
  bool held_out = false;
  // Output throughput, then the TTFT, TPOT, ITL and E2E p50s; a figure the run cannot give
  // (TPOT of one-token outputs) is left out.
  std::vector<FitFigure> figures;
};

struct FittedValue {
  std::string key;
  double before = 0, after = 0;  // in the key's unit; before: the value in effect
};

struct BenchmarkFit {
  scenario::Scenario fitted;  // the scenario with the fitted values
  std::vector<FittedValue> values;
  std::vector<std::string> not_fitted;  // one line per parameter left as it was, and why
  std::vector<std::string> notes;       // what was reconstructed, capped or cut
  std::vector<FitRun> runs;
  std::int64_t fitted_figures = 0;  // the figures of the fitting runs the loss is over
  double loss_before = 0, loss_after = 0;
  std::int64_t evaluations = 0;  // each simulates every fitting run under every seed
  std::int64_t simulations = 0;
};

// Holds out the runs at the hold-out rate, fits the parameters the other runs' figures determine
// by coordinate descent on the mean squared log ratio simulated / measured of their judged
// figures, and compares every run before and after. Throws InputError (one line) for fewer runs
// than a fit needs, a hold-out rate no run has, a scenario it cannot fit (not the roofline,
// several kinds of replica) and figures no parameter moves.
BenchmarkFit fit_benchmark_runs(const scenario::Scenario& scenario,
                                std::span<const traces::ServingBenchmark> runs,
                                const BenchmarkFitOptions& options = {});

// The fit's report, one line each: the runs, the parameters fitted and not, the notes, and per
// run its figures with their errors before and after, the held-out run's last.
std::vector<std::string> benchmark_fit_report(const BenchmarkFit& fit);

// The hardware: section (launch overhead and every correction) and cost_model: section
// (efficiencies) of the fitted scenario, with the report in its comments naming the files fitted
// and the scenario: what `calibrate --against` writes.
std::string benchmark_fit_yaml(const BenchmarkFit& fit, std::span<const std::string> files,
                               const std::string& scenario_file);

}  // namespace exitsim::analysis
