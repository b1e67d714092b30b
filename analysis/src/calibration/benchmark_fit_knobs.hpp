#pragma once
// The parameters `calibrate --against` may fit (benchmark_fit.cpp): the roofline's named
// corrections, the cost model's efficiencies and the launch overhead, each with its search
// interval and where it lives in a scenario.

#include <string>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::analysis {

struct FitKnob {
  const char* key;   // the scenario key
  double low, high;  // the search interval, in the key's unit (us for latencies)
  // The value the cost model acts on, in the key's unit: a correction at 0 ("the default")
  // reads as what it defaults to (an efficiency as the cost model's, the ridge as max: 8).
  double (*in_effect)(const HardwareSpec&, const scenario::CostModelConfig&);
  void (*set)(HardwareSpec&, scenario::CostModelConfig&, double value);
  // Why no iteration of the scenario prices it ("" when some does): a collective without tensor
  // parallelism, a hand-off without pipeline stages.
  std::string (*absent)(const ParallelSpec&, const HardwareSpec&);
};

// Every knob, in the order the fit prefers them when the runs cannot tell two apart: the
// efficiencies first (the first-order terms), then the kernel corrections, the launch overhead,
// and the links.
const std::vector<FitKnob>& fit_knobs();

// Sets `knob` to `value` in the scenario's hardware and cost model and in every replica group's
// (the simulator builds its replicas from the groups).
void set_knob(scenario::Scenario& scenario, const FitKnob& knob, double value);

}  // namespace exitsim::analysis
