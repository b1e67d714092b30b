// `exitsim validate SCENARIO --against RESULT`: a serving benchmark's result replayed in the
// simulator on the scenario (docs/calibration.md, "Validate against a serving benchmark").
#pragma once

#include <string>

#include "scenario_options.hpp"

namespace exitsim::cli {

struct AgainstArgs {
  ScenarioOptions scenario;
  std::string out;
  std::string file;  // the benchmark's result
  int arrival_seeds = 5;
  bool ignore_max_concurrency = false;
  int run = 0;                       // --run (1-based); 0: the file's last run
  std::string prefix_cache = "off";  // --prefix-cache: off | warm
  // --overlay: scenario sections laid over the scenario (what calibrate --against writes): the
  // requests are replayed on both, and both are compared.
  std::string overlay;
};

void run_validate_against(const AgainstArgs& args);

}  // namespace exitsim::cli
