#include "validate_against.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/serving_benchmark.hpp"
#include "exitsim/traces/staged_output_directory.hpp"
#include "progress.hpp"

namespace exitsim::cli {
namespace {

constexpr const char* k_against_only[] = {"--arrival-seeds", "--ignore-max-concurrency",
                                          "--overlay"};

// Where the benchmark and the scenario meet, and every line of what could not be matched.
analysis::BenchmarkProvenance provenance_of(const traces::ServingBenchmark& bench,
                                            const scenario::Scenario& s,
                                            const ValidateAgainstArgs& args) {
  analysis::BenchmarkProvenance p;
  p.file = args.file;
  p.format = traces::format_name(bench.format);
  p.line = bench.line;
  p.backend = bench.backend;
  p.model_id = bench.model_id;
  p.tokenizer_id = bench.tokenizer_id;
  p.date = bench.date;
  p.scenario_model = s.model.shape.name;
  p.request_rate = bench.request_rate ? fmt::format("{}", *bench.request_rate) : "inf";
  p.burstiness = bench.burstiness;
  p.requests_in_file = static_cast<std::int64_t>(bench.requests.size());
  p.excluded_failed = bench.failed_requests();
  p.requests_compared = p.requests_in_file - p.excluded_failed;
  p.max_concurrency = bench.max_concurrency;
  p.max_concurrency_ignored = bench.max_concurrency.has_value();
  if (!bench.request_rate) {
    p.arrivals = "request_rate inf: every request sent at time 0 (no reconstruction needed)";
  } else if (bench.format == traces::ServingBenchmarkFormat::sglang) {
    p.arrivals = fmt::format(
        "not in the file: Poisson at {} req/s (SGLang's exponential gaps), drawn under {} seeds",
        *bench.request_rate, args.arrival_seeds);
  } else {
    p.arrivals = fmt::format(
        "not in the file: gamma gaps of shape {} (burstiness) and mean 1/{} s, rescaled to end "
        "at n/rate as vLLM does, drawn under {} seeds",
        bench.burstiness, *bench.request_rate, args.arrival_seeds);
  }
  std::vector<std::string>& unmatched = p.unmatched;
  unmatched.push_back("arrivals: " + p.arrivals);
  if (p.excluded_failed > 0) {
    unmatched.push_back(fmt::format(
        "{} of {} requests failed in the benchmark (error, no output or no first token) and are "
        "neither replayed nor compared",
        p.excluded_failed, p.requests_in_file));
  }
  if (bench.format == traces::ServingBenchmarkFormat::vllm && !bench.burstiness_given)
    unmatched.push_back("the file names no burstiness: Poisson arrivals (burstiness 1) assumed");
  if (bench.lines > 1) {
    unmatched.push_back(
        fmt::format("the file holds {} runs (JSON Lines): the last, line {}, is "
                    "compared",
                    bench.lines, bench.line));
  }
  if (bench.max_concurrency) {
    unmatched.push_back(fmt::format(
        "max_concurrency {}: the benchmark held at most that many requests in flight; the "
        "simulator replays an open workload (--ignore-max-concurrency), so queueing differs",
        *bench.max_concurrency));
  }
  const std::string named = !bench.model_id.empty() ? bench.model_id : bench.tokenizer_id;
  unmatched.push_back(fmt::format(
      "model: the file names \"{}\" (backend \"{}\"), the scenario simulates \"{}\" on {}; "
      "exitsim cannot check that they are the same",
      named.empty() ? "none" : named, bench.backend, s.model.shape.name, s.hardware.spec.name));
  unmatched.push_back(
      "the scenario's workload section is not used: the file's request lengths replace it");
  for (std::string& line : analysis::summary_cross_checks(bench))
    unmatched.push_back(std::move(line));
  for (std::string& line : analysis::warm_prefix_cache_evidence(bench, s.model.shape,
                                                                s.hardware.spec, s.parallel.tensor))
    unmatched.push_back(std::move(line));

  return p;
}

// The simulator's runs of the benchmark on `s`, one per arrival seed (s.seed, s.seed + 1, ...).
std::vector<sim::MetricsSummary> replay(const traces::ServingBenchmark& bench,
                                        const scenario::Scenario& s,
                                        std::span<const std::uint64_t> seeds,
                                        const std::string& label, std::int64_t& rejected) {
  std::vector<sim::MetricsSummary> runs;
  ProgressReporter reporter("validate", "arrival seeds");
  for (const std::uint64_t seed : seeds) {
    const std::vector<TimeNs> arrivals = analysis::benchmark_arrivals(bench, seed);
    runs.push_back(analysis::simulate_benchmark(s, bench, arrivals));
    rejected = std::max(rejected, runs.back().rejected.total());
    reporter.update(static_cast<double>(runs.size()), static_cast<double>(seeds.size()),
                    fmt::format("{}seed {}", label, seed));
  }
  return runs;
}

}  // namespace

void add_validate_against_options(CLI::App& command, ValidateAgainstArgs& args) {
  command
      .add_option("--against", args.file,
                  "A vLLM (`vllm bench serve --save-result --save-detailed`) or SGLang "
                  "(`bench_serving --output-details`, last line) result: replay its requests on "
                  "the scenario and compare the simulator with it")
      ->type_name("RESULT.json");
  command
      .add_option("--arrival-seeds", args.arrival_seeds,
                  "--against: simulations, each with its own draw of the benchmark's unknown "
                  "arrival times; metrics report their median and min-max (default 5)")
      ->check(CLI::Range(1, 1000));
  command.add_flag("--ignore-max-concurrency", args.ignore_max_concurrency,
                   "--against: compare a benchmark run with --max-concurrency anyway (the "
                   "simulator replays an open workload; said in the output)");
  command
      .add_option("--overlay", args.overlay,
                  "--against: scenario sections laid over the scenario (the hardware: and "
                  "cost_model: sections `calibrate --against` writes): the requests are replayed "
                  "on both, and the scenario's figures and the overlaid ones are compared side "
                  "by side")
      ->type_name("FILE");
}

void refuse_validate_against_options_alone(const CLI::App& command) {
  for (const char* option : k_against_only) {
    if (command.count(option) > 0) {
      throw InputError({"", 0, 0, option},
                       expected_found("--against (the option applies to it only)", "no --against"));
    }
  }
}

// The benchmark's requests replayed on the scenario (and on it with --overlay's sections) under
// `arrival_seeds` reconstructions of their unknown send times.
void run_validate_against(const ScenarioOptions& scenario, const ValidateAgainstArgs& args,
                          const std::string& out_dir) {
  check_output_directory(out_dir, "--out");
  const traces::ServingBenchmark bench = traces::read_serving_benchmark(args.file);
  analysis::check_open_workload(bench, args.ignore_max_concurrency);
  const scenario::Scenario s = scenario.load();
  std::optional<scenario::Scenario> overlaid;
  if (!args.overlay.empty()) {
    overlaid =
        scenario::load_scenario_with_overlay(scenario.file, scenario.overrides, args.overlay);
  }
  analysis::BenchmarkProvenance p = provenance_of(bench, s, args);
  const int seeds = bench.request_rate ? args.arrival_seeds : 1;
  for (int k = 0; k < seeds; ++k)
    p.arrival_seeds.push_back(s.seed + static_cast<std::uint64_t>(k));
  std::int64_t rejected = 0;
  const std::vector<analysis::NamedFigure> figures = analysis::benchmark_figures(bench);
  std::vector<analysis::ValidationResult> results{analysis::compare_with_benchmark(
      s.sync.strategy, figures, replay(bench, s, p.arrival_seeds, "", rejected))};
  if (overlaid) {
    // Its own label: the CSV's strategy column and the JSON's strategies tell the two apart.
    results.push_back(analysis::compare_with_benchmark(
        overlaid->sync.strategy + "+overlay", figures,
        replay(bench, *overlaid, p.arrival_seeds, "overlay, ", rejected)));
    p.overlay = args.overlay;
    p.unmatched.push_back(
        fmt::format("overlay: {} laid over the scenario; its comparison is labelled {}+overlay",
                    args.overlay, overlaid->sync.strategy));
  }
  if (rejected > 0) {
    p.unmatched.push_back(fmt::format(
        "the scenario could not serve {} of the replayed requests (rejected; see simulate)",
        rejected));
  }

  // The file's own strings (model_id, backend) are shown as error messages show them: a terminal
  // escape in a benchmark file must not reach the console.
  fmt::print("against    {}\n", one_safe_line(fmt::format(
                                    "{} ({} {}, {} of {} requests compared)", args.file, p.format,
                                    bench.backend, p.requests_compared, p.requests_in_file)));
  fmt::print("{}", analysis::format_validation(results));
  for (const std::string& line : p.unmatched)
    fmt::print("not matched {}\n", one_safe_line(line));

  traces::StagedOutputDirectory out(out_dir, "--out");
  const std::filesystem::path staging(out.staging());
  traces::write_file_atomically((staging / "validation.csv").string(),
                                analysis::validation_csv(results));
  analysis::ValidationConditions conditions;
  conditions.hardware = s.hardware.spec.name;
  conditions.against = std::move(p);
  traces::write_file_atomically((staging / "validation.json").string(),
                                analysis::validation_json(results, conditions));
  out.commit();
  fmt::print("wrote      {} and validation.json\n",
             (std::filesystem::path(out_dir) / "validation.csv").string());
}

}  // namespace exitsim::cli
