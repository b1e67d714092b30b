#pragma once

// `exitsim engine eval`: the quality table of exit settings on an evaluation text and, on
// request, the calibration table adaptive_threshold's simulation draws from.

#include <string>
#include <vector>

#include "engine_model.hpp"
#include "exitsim/engine/quality_eval.hpp"

namespace exitsim::cli {

struct EvalArgs {
  ModelOptions model;
  std::vector<double> thresholds;
  std::string measure = "top1";
  std::vector<double> router_thresholds;
  bool token_choice = false;
  bool oracle = false;
  std::vector<double> adaptive_thresholds;  // initial thresholds of adaptive_threshold settings
  std::vector<std::string> strategies;
  engine::QualityEvalOptions options;
  std::string out;
  std::string calibration_table;  // where to write the calibration table; empty: none
};

void run_eval(const EvalArgs& args);

}  // namespace exitsim::cli
