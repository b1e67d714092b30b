#include "exitsim/analysis/benchmark_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "benchmark_fit_knobs.hpp"
#include "benchmark_fit_replay.hpp"
#include "benchmark_fit_selection.hpp"
#include "coordinate_search.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::analysis {
namespace {

// A figure's noise is the seeds' spread, at least this: the simulator reports percentiles from a
// sketch of 1%-wide buckets (sim::LatencySketch, 0.5% relative error), so a figure moved by less
// than 1% may not move at all.
constexpr double k_noise_floor = 0.01;  // as a log ratio
// Coordinate descent: at most this many rounds over the chosen parameters, ending sooner when a
// round improves nothing (parameters that trade off converge over several rounds).
constexpr int k_max_search_rounds = 6;

// The rate a run sent its requests at: the benchmark's request rate, else, where the send times
// are recorded (GuideLLM's synchronous, concurrent and throughput strategies name none), the
// requests over the run's duration; absent: all sent at once ("inf").
std::optional<double> offered_rate(const traces::ServingBenchmark& run) {
  if (run.request_rate || !run.arrivals_recorded() || !(run.duration_s > 0))
    return run.request_rate;
  return static_cast<double>(run.requests.size()) / run.duration_s;
}

std::string rate_text(const traces::ServingBenchmark& run) {
  const std::optional<double> rate = offered_rate(run);
  if (!rate)
    return "inf";
  return fmt::format("{:.4g} req/s{}", *rate, run.request_rate ? "" : " (sent, measured)");
}

double rate_order(const traces::ServingBenchmark& run) {
  return offered_rate(run).value_or(std::numeric_limits<double>::infinity());
}

// The runs at `rate` (+infinity: "inf"), by their request rates within 1%.
bool at_rate(const traces::ServingBenchmark& run, double rate) {
  const std::optional<double> offered = offered_rate(run);
  if (std::isinf(rate))
    return !offered;
  return offered && std::abs(*offered - rate) <= 0.01 * rate;
}

// The file, and the run's number in a file that holds several (GuideLLM, SGLang's JSON Lines).
std::string run_label(const traces::ServingBenchmark& run) {
  return run.runs > 1 ? fmt::format("{} run {}", run.path, run.run) : run.path;
}

void check_fittable(const scenario::Scenario& s, std::span<const traces::ServingBenchmark> runs) {
  if (runs.size() < 2) {
    throw InputError(
        {"", 0, 0, "--against"},
        expected_found("serving-benchmark runs at two or more request rates (one held out to "
                       "judge the fit, the others fitted)",
                       runs.empty() ? "none"
                                    : fmt::format("one run ({} at {})", run_label(runs[0]),
                                                  rate_text(runs[0]))));
  }
  for (const traces::ServingBenchmark& run : runs) {
    if (run.summary_only) {
      throw InputError({run.path, run.line, 0, ""},
                       expected_found("per-request results (the fit replays every request)",
                                      "a summary-only result (validate --against compares it)"));
    }
  }
  if (s.cost_model.kind != "roofline") {
    throw InputError(
        {"", 0, 0, "cost_model.kind"},
        expected_found("roofline (the fit moves the roofline's parameters)", s.cost_model.kind));
  }
  if (s.replica_groups.size() != 1) {
    throw InputError({"", 0, 0, "cluster.groups"},
                     expected_found("one kind of replica (the benchmark measured one deployment)",
                                    fmt::format("{} groups", s.replica_groups.size())));
  }
}

// The rate held out: the option's, else the highest (inf above every number).
double hold_out_rate(std::span<const traces::ServingBenchmark> runs,
                     const BenchmarkFitOptions& options) {
  std::vector<std::string> rates;
  double highest = -1;
  for (const traces::ServingBenchmark& run : runs) {
    rates.push_back(rate_text(run));
    highest = std::max(highest, rate_order(run));
  }
  const double rate = options.hold_out_rate.value_or(highest);
  const auto held = std::count_if(runs.begin(), runs.end(), [&](const traces::ServingBenchmark& r) {
    return at_rate(r, rate);
  });
  const std::string named = std::isinf(rate) ? "inf" : fmt::format("{:.4g}", rate);
  if (held == 0) {
    throw InputError({"", 0, 0, "--hold-out"},
                     expected_found(fmt::format("the request rate of one of the runs ({})",
                                                fmt::join(rates, ", ")),
                                    named));
  }
  if (held == static_cast<std::ptrdiff_t>(runs.size())) {
    throw InputError({"", 0, 0, "--hold-out"},
                     expected_found("runs at another request rate than the one held out, to fit",
                                    fmt::format("all {} runs at {}", runs.size(), named)));
  }
  return rate;
}

// The fitting runs simulated on a scenario, counted.
class Search {
 public:
  Search(std::span<const ReplayedRun> runs, std::function<void(std::int64_t)> on_evaluation)
      : runs_(runs), on_evaluation_(std::move(on_evaluation)) {}

  FigureLogs evaluate(const scenario::Scenario& s) {
    FigureLogs logs;
    for (const ReplayedRun& run : runs_) {
      if (run.held_out)
        continue;
      for (const ComparedFigure& f : compare_replay(s, run.searched, simulations)) {
        // A figure simulated as 0 (no request finished) counts as a millionth of the measured.
        const double simulated = std::max(f.simulated, 1e-6 * f.measured);
        logs.simulated.push_back(std::log(simulated));
        logs.measured.push_back(std::log(f.measured));
        const double spread =
            f.seed_min > 0 && f.seed_max > 0 ? std::log(f.seed_max / f.seed_min) : 0.0;
        logs.noise.push_back(std::max(k_noise_floor, spread));
        logs.names.push_back(fmt::format("{} of {}", f.name, run_label(*run.file)));
      }
    }
    ++evaluations;
    if (on_evaluation_)
      on_evaluation_(evaluations);
    return logs;
  }

  // The mean squared log ratio simulated / measured over the fitting runs' figures.
  double loss(const scenario::Scenario& s) {
    const FigureLogs logs = evaluate(s);
    double sum = 0;
    for (std::size_t i = 0; i < logs.simulated.size(); ++i)
      sum += std::pow(logs.simulated[i] - logs.measured[i], 2);
    return logs.simulated.empty() ? 0 : sum / static_cast<double>(logs.simulated.size());
  }

  std::int64_t evaluations = 0;
  std::int64_t simulations = 0;

 private:
  std::span<const ReplayedRun> runs_;
  std::function<void(std::int64_t)> on_evaluation_;
};

// What the fit could not take from `run` as it is, one note each (as validate --against says it).
void add_run_notes(const scenario::Scenario& s, const traces::ServingBenchmark& run,
                   std::vector<std::string>& notes) {
  if (const std::int64_t failed = run.failed_requests(); failed > 0) {
    notes.push_back(fmt::format(
        "{}: {} of {} requests failed in the benchmark and are neither replayed nor compared",
        run_label(run), failed, run.requests.size()));
  }
  for (const std::string& note : run.notes)
    notes.push_back(run_label(run) + ": " + note);
  if (run.format == traces::ServingBenchmarkFormat::vllm && !run.burstiness_given)
    notes.push_back(run_label(run) + ": the file names no burstiness: Poisson arrivals assumed");
  if (run.max_concurrency) {
    notes.push_back(
        fmt::format("{}: max_concurrency {}: replayed as an open workload "
                    "(--ignore-max-concurrency), so queueing differs",
                    run_label(run), *run.max_concurrency));
  }
  for (const std::string& line : warm_prefix_cache_evidence(
           run, s.model.shape, s.hardware.spec, s.parallel.tensor, PromptReplay::computed_in_fit))
    notes.push_back(run_label(run) + ": " + line);
}

std::string hold_out_note(double rate, const BenchmarkFitOptions& options) {
  const std::string named =
      std::isinf(rate) ? std::string("request rate inf") : fmt::format("{:.4g} req/s", rate);
  return options.hold_out_rate
             ? fmt::format("held out: the runs at {} (--hold-out)", named)
             : fmt::format(
                   "held out: the runs at {}, the highest rate: the fit is judged on a "
                   "heavier load than any it was fitted on (--hold-out picks another)",
                   named);
}

}  // namespace

std::vector<traces::ServingBenchmark> read_benchmark_runs(std::span<const std::string> paths) {
  std::vector<traces::ServingBenchmark> runs;
  for (const std::string& path : paths) {
    for (traces::ServingBenchmark& run : traces::read_serving_benchmark_runs(path))
      runs.push_back(std::move(run));
  }
  return runs;
}

BenchmarkFit fit_benchmark_runs(const scenario::Scenario& scenario,
                                std::span<const traces::ServingBenchmark> runs,
                                const BenchmarkFitOptions& options) {
  check_fittable(scenario, runs);
  const double held_rate = hold_out_rate(runs, options);
  BenchmarkFit fit;
  fit.notes.push_back(hold_out_note(held_rate, options));
  const std::string seed_text =
      options.arrival_seeds == 1
          ? fmt::format("seed {}", scenario.seed)
          : fmt::format("seeds {}-{}", scenario.seed,
                        scenario.seed + static_cast<std::uint64_t>(options.arrival_seeds - 1));
  fit.notes.push_back(fmt::format(
      "arrivals: as validate --against replays them: recorded send times where the file has "
      "them (GuideLLM, AIPerf), else reconstructed, each run simulated under {} and compared at "
      "their median (once where the arrivals are fixed: recorded, request rate inf or even "
      "gaps)",
      seed_text));
  std::vector<ReplayedRun> replays;
  for (const traces::ServingBenchmark& run : runs) {
    check_open_workload(run, options.ignore_max_concurrency);
    add_run_notes(scenario, run, fit.notes);
    std::vector<std::uint64_t> seeds;
    const bool fixed = run.arrivals_recorded() || !run.request_rate || std::isinf(run.burstiness);
    for (int k = 0; k < (fixed ? 1 : options.arrival_seeds); ++k)
      seeds.push_back(scenario.seed + static_cast<std::uint64_t>(k));
    replays.push_back(replay_run(run, seeds, options.search_requests));
    replays.back().held_out = at_rate(run, held_rate);
  }
  Search search(replays, options.on_evaluation);
  const FigureLogs at_start = search.evaluate(scenario);
  fit.fitted_figures = static_cast<std::int64_t>(at_start.simulated.size());
  const std::vector<ChosenParameter> chosen = choose_parameters(
      scenario, at_start, [&](const scenario::Scenario& s) { return search.evaluate(s); },
      fit.not_fitted);
  if (chosen.empty()) {
    throw InputError({"", 0, 0, "--against"},
                     expected_found("fitting runs whose figures some parameter of the roofline "
                                    "moves beyond their noise and away from the measured ones",
                                    "none: " + fmt::format("{}", fmt::join(fit.not_fitted, "; "))));
  }
  fit.loss_before = search.loss(scenario);
  scenario::Scenario trial = scenario;
  std::vector<double> values;
  for (const ChosenParameter& c : chosen)
    values.push_back(c.value);
  const auto loss = [&] {
    for (std::size_t i = 0; i < chosen.size(); ++i)
      set_knob(trial, *chosen[i].knob, values[i]);
    return search.loss(trial);
  };
  double best = loss();
  for (int round = 0; round < k_max_search_rounds; ++round) {
    const double round_start = best;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      const FitKnob& knob = *chosen[i].knob;
      const double kept = values[i];
      golden_section_search({knob.key, &values[i], knob.low, knob.high}, loss);
      // The search assumes one minimum in the interval; where it ends worse, the value stays.
      if (const double now = loss(); now <= best) {
        best = now;
      } else {
        values[i] = kept;
      }
    }
    if (!(best < round_start))
      break;
  }
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const FitKnob& knob = *chosen[i].knob;
    set_knob(trial, knob, values[i]);
    fit.values.push_back(
        {knob.key, knob.in_effect(scenario.hardware.spec, scenario.cost_model), values[i]});
    if (std::optional<std::string> edge = edge_note({knob.key, &values[i], knob.low, knob.high}))
      fit.notes.push_back(std::move(*edge));
  }
  fit.loss_after = best;
  trial.hardware.spec.kernels.source = "fitted by exitsim calibrate --against";
  fit.fitted = trial;
  fit.evaluations = search.evaluations;
  for (const ReplayedRun& run : replays) {
    FitRun out{run_label(*run.file), offered_rate(*run.file), run.held_out, {}};
    const std::vector<ComparedFigure> before = compare_replay(scenario, run.whole, fit.simulations);
    const std::vector<ComparedFigure> after =
        compare_replay(fit.fitted, run.whole, fit.simulations);
    for (std::size_t i = 0; i < before.size(); ++i)
      out.figures.push_back(
          {before[i].name, before[i].measured, before[i].simulated, after[i].simulated});
    fit.runs.push_back(std::move(out));
    if (run.capped && !run.held_out) {
      fit.notes.push_back(fmt::format(
          "{}: the search simulated its first {} of {} requests (their own p50s; the throughput "
          "of part of a run is not measured); before and after compare all of them",
          run_label(*run.file), options.search_requests, run.file->requests.size()));
    }
  }
  fit.simulations += search.simulations;
  return fit;
}

}  // namespace exitsim::analysis
