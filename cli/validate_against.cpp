// `validate --against FILE`: the benchmark's requests replayed on the scenario, at their recorded
// send times or under `arrival_seeds` reconstructions of them (analysis/against_benchmark.hpp);
// this file parses, loads, prints and writes.
#include "validate_against.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "exitsim/analysis/against_benchmark.hpp"
#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/staged_output_directory.hpp"
#include "output_paths.hpp"
#include "progress.hpp"

namespace exitsim::cli {

void run_validate_against(const AgainstArgs& args) {
  check_output_directory(args.out, "--out");
  traces::ServingBenchmark bench = analysis::pick_benchmark_run(args.file, args.run);
  analysis::check_open_workload(bench, args.ignore_max_concurrency);
  const bool warm = args.prefix_cache == "warm";
  if (warm && bench.summary_only) {
    throw InputError({"", 0, 0, "--prefix-cache"},
                     expected_found("a result with per-request input lengths (repetition is "
                                    "recognised from them)",
                                    fmt::format("{}, summary only", args.file)));
  }
  ScenarioOptions options = args.scenario;
  if (warm)
    options.overrides.push_back("scheduler.prefix_caching=true");
  const scenario::Scenario s = options.load();
  std::optional<scenario::Scenario> overlaid;
  if (!args.overlay.empty())
    overlaid = scenario::load_scenario_with_overlay(options.file, options.overrides, args.overlay);
  // One progress line per replayed scenario (the overlaid one starts again at its first seed).
  std::optional<ProgressReporter> reporter;
  const analysis::SeedProgress progress = [&](std::size_t done, std::size_t total,
                                              const std::string& detail) {
    if (done == 1)
      reporter.emplace("validate", "arrival seeds");
    reporter->update(static_cast<double>(done), static_cast<double>(total), detail);
  };
  analysis::AgainstBenchmarkComparison compared = analysis::compare_against_benchmark(
      std::move(bench), s, overlaid ? &*overlaid : nullptr,
      {args.file, args.arrival_seeds, warm, args.overlay}, progress);
  reporter.reset();
  const std::vector<analysis::ValidationResult>& results = compared.results;

  fmt::print("against    {}\n", compared.headline);
  fmt::print("{}", analysis::format_validation(results));
  for (const std::string& line : compared.provenance.unmatched)
    fmt::print("not matched {}\n", one_safe_line(line));

  traces::StagedOutputDirectory out(args.out, "--out");
  const std::filesystem::path staging(out.staging());
  traces::write_file_atomically((staging / "validation.csv").string(),
                                analysis::validation_csv(results));
  analysis::ValidationConditions conditions;
  conditions.hardware = s.hardware.spec.name;
  conditions.against = std::move(compared.provenance);
  traces::write_file_atomically((staging / "validation.json").string(),
                                analysis::validation_json(results, conditions));
  out.commit();
  fmt::print("wrote      {} and validation.json\n",
             (std::filesystem::path(args.out) / "validation.csv").string());
}

}  // namespace exitsim::cli
