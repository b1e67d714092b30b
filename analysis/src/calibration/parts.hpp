#pragma once
// What the calibration's files share (analysis/src/calibration): reading measurements, fitting
// one op, and the names they use.

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"

namespace exitsim::analysis {

// The median absolute percentage error of `fit` on the samples.
double median_ape(const sim::OpFit& fit, std::span<const OpSample* const> samples);

// Ops the calibrated model prices one call at a time (and their ".prefill" fits); the rest of a
// step is its residual.
bool priced_op(std::string_view name);

// Per op name: the op trace's kind and the samples.
using Samples = std::map<std::string, std::pair<std::string, std::vector<OpSample>>>;

// One step of an op trace, for its residual: its wall time (first op to the next step's first
// op), the time it waited for arrivals, the tokens it embedded and emitted, and its priced calls
// (the op's name in `samples`, a key that outlives the step, and the call).
struct TraceStep {
  double wall_us = 0;
  double idle_us = 0;
  double embedded = 0;
  double emitted = 0;
  std::vector<std::pair<const std::string*, OpSample>> calls;
};

// One op trace's calls per op, and its steps (docs/calibration.md). With
// `split_passes`, a layer op's calls in a step's prefill pass are filed as "<op>.prefill" (the
// pass is read from steps.csv beside the trace; without it every call counts as decode).
void read_trace(const std::string& path, bool split_passes, Samples& samples,
                std::vector<TraceStep>& steps);
// One op grid's points per op: each point's median is one sample; prefill-shaped points are
// filed as "<op>.prefill".
void read_grid(const std::string& path, Samples& samples);

// Fits every priced op of `traced` and `grid` (an op the grid timed from the grid), the step
// residual of `steps` and the steps' spread around their price, into `profile`.
void fit_measurements(const Samples& traced, const Samples& grid,
                      const std::vector<TraceStep>& steps, const CalibrationOptions& options,
                      sim::CostProfile& profile);

// Throws InputError naming the field where `b` was measured by another engine, backend,
// hardware or model shape than `a`.
void same_source(const sim::ProfileSource& a, const sim::ProfileSource& b);

}  // namespace exitsim::analysis
