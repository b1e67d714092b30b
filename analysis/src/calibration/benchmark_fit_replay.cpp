#include "benchmark_fit_replay.hpp"

#include <algorithm>
#include <string_view>

#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

ReplayedRun replay_run(const traces::ServingBenchmark& run, std::span<const std::uint64_t> seeds,
                       std::int64_t search_requests) {
  ReplayedRun out;
  out.file = &run;
  out.whole.benchmark = run;
  for (const std::uint64_t seed : seeds)
    out.whole.arrivals.push_back(benchmark_arrivals(run, seed));
  out.whole.measured = benchmark_figures(run);
  const auto requests = static_cast<std::int64_t>(run.requests.size());
  out.capped = search_requests > 0 && requests > search_requests;
  if (!out.capped) {
    out.searched = out.whole;
    return out;
  }
  // The first requests as they were sent: their own p50s; the throughput of part of a run is
  // not measured (its duration is the whole run's).
  const auto first = static_cast<std::size_t>(search_requests);
  out.searched.benchmark = run;
  out.searched.benchmark.requests.resize(first);
  for (const std::vector<TimeNs>& arrivals : out.whole.arrivals)
    out.searched.arrivals.emplace_back(arrivals.begin(), arrivals.begin() + search_requests);
  out.searched.measured = benchmark_figures(out.searched.benchmark);
  out.searched.with_throughput = false;
  return out;
}

std::vector<ComparedFigure> compare_replay(const scenario::Scenario& scenario, const Replay& replay,
                                           std::int64_t& simulations) {
  std::vector<sim::MetricsSummary> runs;
  for (const std::vector<TimeNs>& arrivals : replay.arrivals) {
    runs.push_back(simulate_benchmark(scenario, replay.benchmark, arrivals));
    ++simulations;
  }
  const ValidationResult compared =
      compare_with_benchmark(scenario.sync.strategy, replay.measured, runs);
  std::vector<ComparedFigure> out;
  for (const std::string_view name : k_fit_figure_names) {
    if (!replay.with_throughput && name == k_fit_figure_names[0])
      continue;
    const auto m = std::find_if(compared.metrics.begin(), compared.metrics.end(),
                                [&](const MetricComparison& c) { return c.metric == name; });
    if (m == compared.metrics.end() || !(m->engine > 0))
      continue;  // not measured: TPOT of one-token outputs
    out.push_back(
        {std::string(name), m->engine, m->simulated, m->simulated_seed_min, m->simulated_seed_max});
  }
  return out;
}

}  // namespace exitsim::analysis
