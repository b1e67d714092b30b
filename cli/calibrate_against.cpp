#include "calibrate_against.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "exitsim/analysis/benchmark_fit.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "progress.hpp"

namespace exitsim::cli {
namespace {

constexpr const char* k_against_only[] = {"--scenario",        "--set",
                                          "--hold-out",        "--arrival-seeds",
                                          "--search-requests", "--ignore-max-concurrency"};

// --hold-out: a request rate in requests/s, or "inf".
std::optional<double> parse_hold_out(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  if (text == "inf")
    return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double rate = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(rate) || !(rate > 0)) {
    throw InputError({"", 0, 0, "--hold-out"},
                     expected_found("a request rate in requests/s, or inf", "\"" + text + "\""));
  }
  return rate;
}

}  // namespace

void add_calibrate_against_options(CLI::App& command, CalibrateAgainstArgs& args) {
  command
      .add_option("--against", args.results,
                  "Fit the roofline's parameters (efficiencies, kernel corrections, launch "
                  "overhead, link terms) to serving-benchmark results of one deployment at "
                  "several request rates (vLLM --save-result --save-detailed, SGLang "
                  "--output-details; as validate --against reads them), holding one rate out to "
                  "judge the fit, and write them as a scenario's hardware: and cost_model: "
                  "sections (YAML) to --out")
      ->type_name("RESULT.json");
  command
      .add_option("--scenario", args.scenario,
                  "With --against (required): the scenario of the deployment (model, hardware, "
                  "scheduler); the fit starts from its values")
      ->type_name("SCENARIO.yaml");
  command.add_option("--set", args.overrides, "With --against: override a key of --scenario")
      ->type_name("KEY=VALUE");
  command
      .add_option("--hold-out", args.hold_out,
                  "With --against: the request rate (req/s, or inf) whose runs are held out "
                  "and predicted (default: the highest)")
      ->type_name("RATE");
  command
      .add_option("--arrival-seeds", args.arrival_seeds,
                  "With --against: arrival draws per run with random arrivals, compared at their "
                  "median (default 3)")
      ->check(CLI::Range(1, 100));
  command
      .add_option("--search-requests", args.search_requests,
                  "With --against: the search simulates each run's first N requests (0: all; "
                  "default 1000); before and after compare all of them")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("--ignore-max-concurrency", args.ignore_max_concurrency,
                   "With --against: fit runs with a --max-concurrency client limit anyway, as "
                   "an open workload (said in the output)");
}

void refuse_calibrate_against_options_alone(const CLI::App& command) {
  for (const char* option : k_against_only) {
    if (command.count(option) > 0) {
      throw InputError({"", 0, 0, option},
                       expected_found("--against (the option applies to it only)", "none"));
    }
  }
}

void run_calibrate_against(const CalibrateAgainstArgs& args, const std::string& output) {
  if (args.scenario.empty()) {
    throw InputError({"", 0, 0, "--scenario"},
                     expected_found("the scenario of the benchmarked deployment (its model, "
                                    "hardware and scheduler)",
                                    "none"));
  }
  if (output.empty())
    throw InputError({"", 0, 0, "--out"}, "expected the hardware section to write, found none");
  analysis::BenchmarkFitOptions options;
  options.hold_out_rate = parse_hold_out(args.hold_out);
  options.arrival_seeds = args.arrival_seeds;
  options.search_requests = args.search_requests;
  options.ignore_max_concurrency = args.ignore_max_concurrency;
  const scenario::Scenario s = scenario::load_scenario_file(args.scenario, args.overrides);
  const std::vector<traces::ServingBenchmark> runs = analysis::read_benchmark_runs(args.results);

  ProgressReporter reporter("calibrate", "evaluations");
  options.on_evaluation = [&](std::int64_t done) {
    reporter.update(static_cast<double>(done), 0, "each simulates every fitting run");
  };
  const auto start = std::chrono::steady_clock::now();
  const analysis::BenchmarkFit fit = analysis::fit_benchmark_runs(s, runs, options);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  reporter.finish();
  traces::write_file_atomically(output,
                                analysis::benchmark_fit_yaml(fit, args.results, args.scenario));
  for (const std::string& line : analysis::benchmark_fit_report(fit))
    fmt::print("fit        {}\n", line);
  // Console only: the written section stays the same from run to run.
  fmt::print("time       {} evaluations of the fitting runs ({} simulations) in {:.1f} s\n",
             fit.evaluations, fit.simulations, took.count());
  fmt::print("wrote      {} (a scenario's hardware: and cost_model: sections{})\n", output,
             s.hardware.preset.empty() ? "" : " on the " + s.hardware.preset + " preset");
}

}  // namespace exitsim::cli
