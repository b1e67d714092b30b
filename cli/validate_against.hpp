#pragma once
// `exitsim validate SCENARIO --against RESULT.json [--overlay FILE]`: a serving benchmark's
// requests replayed on the scenario (docs/calibration.md, "Validate against a serving
// benchmark").

#include <CLI/CLI.hpp>
#include <string>

#include "scenario_options.hpp"

namespace exitsim::cli {

struct ValidateAgainstArgs {
  std::string file;  // --against
  int arrival_seeds = 5;
  bool ignore_max_concurrency = false;
  // Scenario sections laid over the scenario (what calibrate --against writes): the replay runs
  // on both, and both are compared.
  std::string overlay;
};

void add_validate_against_options(CLI::App& command, ValidateAgainstArgs& args);

// Refuses an option above given without --against, naming it.
void refuse_validate_against_options_alone(const CLI::App& command);

void run_validate_against(const ScenarioOptions& scenario, const ValidateAgainstArgs& args,
                          const std::string& out);

}  // namespace exitsim::cli
