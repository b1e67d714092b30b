#pragma once
// The runs `calibrate --against` fits, replayed as `validate --against` replays them
// (benchmark_fit.cpp): their reconstructed arrivals under a fixed set of seeds, the first requests
// the search simulates, and the judged figures compared, simulated against measured.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::analysis {

// The judged figures the fit compares: output throughput and the TTFT, TPOT, ITL and E2E p50s.
inline constexpr const char* k_fit_figure_names[] = {"throughput_tokens_per_s", "ttft_p50_ms",
                                                     "tpot_p50_ms", "itl_p50_ms", "e2e_p50_ms"};

// One judged figure: measured, and simulated as the seeds' median with their lowest and highest.
struct ComparedFigure {
  std::string name;
  double measured = 0, simulated = 0, seed_min = 0, seed_max = 0;
};

// Requests of a run replayed under one or more arrival draws.
struct Replay {
  traces::ServingBenchmark benchmark;         // the requests replayed (file order)
  std::vector<std::vector<TimeNs>> arrivals;  // one per seed, one per request
  std::vector<NamedFigure> measured;          // benchmark_figures(benchmark)
  bool with_throughput = true;                // false: the first requests of a run
};

struct ReplayedRun {
  const traces::ServingBenchmark* file = nullptr;
  bool held_out = false;
  Replay whole;     // every request: the comparisons before and after
  Replay searched;  // what the search simulates: the first BenchmarkFitOptions::search_requests
  bool capped = false;
};

// `run` replayed under `seeds` (validate's reconstruction; its arrivals are the whole run's, so
// that the first requests keep their send times), and its first `search_requests` (0: all).
ReplayedRun replay_run(const traces::ServingBenchmark& run, std::span<const std::uint64_t> seeds,
                       std::int64_t search_requests);

// The judged figures the run measured (above 0), simulated on `scenario` once per seed;
// `simulations` counts the runs of the simulator.
std::vector<ComparedFigure> compare_replay(const scenario::Scenario& scenario, const Replay& replay,
                                           std::int64_t& simulations);

}  // namespace exitsim::analysis
