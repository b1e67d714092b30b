#pragma once
// Which parameters `calibrate --against` fits (benchmark_fit.cpp): those whose effect on the
// fitting runs' figures the data can tell apart and that the misfit calls for.

#include <functional>
#include <string>
#include <vector>

#include "benchmark_fit_knobs.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::analysis {

// The fitting runs' judged figures on one scenario: log(simulated) beside log(measured), and
// each figure's noise (the arrival seeds' spread as a log ratio, at least 1%).
struct FigureLogs {
  std::vector<double> simulated, measured, noise;
  std::vector<std::string> names;  // "ttft_p50_ms of FILE", for messages
};

using EvaluateFigures = std::function<FigureLogs(const scenario::Scenario&)>;

// A parameter chosen to fit, and the value it starts from (in effect, inside its interval).
struct ChosenParameter {
  const FitKnob* knob = nullptr;
  double value = 0;
};

// The parameters to fit, in the order chosen; a line in `not_fitted` for every other knob, saying
// why: priced by nothing the scenario runs, an effect below the noise, an effect the chosen ones
// already have, or too little of the misfit left for it to explain. Throws InputError when more
// parameters move the figures than there are figures.
std::vector<ChosenParameter> choose_parameters(const scenario::Scenario& start,
                                               const FigureLogs& at_start,
                                               const EvaluateFigures& evaluate,
                                               std::vector<std::string>& not_fitted);

}  // namespace exitsim::analysis
