#pragma once

// `exitsim validate --against FILE`: a serving benchmark's result replayed in the simulator on a
// scenario (docs/calibration.md, "Validate against a serving benchmark"), and what could not be
// matched, said line by line. The CLI parses the flags, loads the scenario, prints and writes.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "exitsim/analysis/validation.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::analysis {

struct AgainstBenchmarkOptions {
  std::string file;  // the benchmark's result
  int arrival_seeds = 5;
  bool warm_prefix_cache = false;  // --prefix-cache warm
  std::string overlay;             // the overlay file, when the overlaid scenario is compared
};

// The run `run` names (1-based), else the file's last. Throws InputError (--run) past the last.
traces::ServingBenchmark pick_benchmark_run(const std::string& file, int run);

struct AgainstBenchmarkComparison {
  std::vector<ValidationResult> results;  // the scenario's, then the overlaid scenario's
  BenchmarkProvenance provenance;         // its `unmatched` lines say what is not matched
  std::string headline;                   // the file and what was compared, one safe line
};

// `done` of `total` arrival seeds simulated; `detail` names the seed (and the overlay).
using SeedProgress =
    std::function<void(std::size_t done, std::size_t total, const std::string& detail)>;

// Replays `benchmark` (one run of options.file) on `s`, and on `overlaid` when not null, under
// each arrival seed. Throws InputError naming the file when it holds no figure exitsim compares.
AgainstBenchmarkComparison compare_against_benchmark(traces::ServingBenchmark benchmark,
                                                     const scenario::Scenario& s,
                                                     const scenario::Scenario* overlaid,
                                                     const AgainstBenchmarkOptions& options,
                                                     const SeedProgress& progress);

}  // namespace exitsim::analysis
