#pragma once
// `exitsim calibrate --against RESULT... --scenario S -o hw.yaml`: the roofline's parameters
// fitted to a deployment's own serving-benchmark runs (docs/calibration.md, "Fit to your own
// benchmark runs").

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace exitsim::cli {

struct CalibrateAgainstArgs {
  std::vector<std::string> results;
  std::string scenario;
  std::vector<std::string> overrides;
  std::string hold_out;  // a request rate, "inf", or "" for the highest
  int arrival_seeds = 3;
  std::int64_t search_requests = 1000;
  bool ignore_max_concurrency = false;
};

void add_calibrate_against_options(CLI::App& command, CalibrateAgainstArgs& args);

// The options above given on `command` without --against: one is refused, naming it.
void refuse_calibrate_against_options_alone(const CLI::App& command);

void run_calibrate_against(const CalibrateAgainstArgs& args, const std::string& output);

}  // namespace exitsim::cli
