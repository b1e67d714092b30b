// adaptive_threshold's run summary and its trajectory file.
#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {

std::int64_t AdaptiveThresholdSummary::degenerate_refits() const {
  return std::count_if(trajectory.begin(), trajectory.end(),
                       [](const ThresholdTrajectoryRow& row) { return !row.fitted; });
}

double AdaptiveThresholdSummary::last_threshold() const {
  return trajectory.empty() ? initial_threshold : trajectory.back().threshold;
}

double AdaptiveThresholdSummary::min_threshold() const {
  double low = initial_threshold;
  for (const ThresholdTrajectoryRow& row : trajectory)
    low = std::min(low, row.threshold);
  return low;
}

double AdaptiveThresholdSummary::max_threshold() const {
  double high = initial_threshold;
  for (const ThresholdTrajectoryRow& row : trajectory)
    high = std::max(high, row.threshold);
  return high;
}

ThresholdTrajectoryRow trajectory_row(std::int64_t step, TimeNs time, int replica,
                                      const policy::ThresholdRefit& refit) {
  const auto& [disagree, agree] = refit.mixture.components;
  return {step,          time,         replica,         refit.attempt,
          refit.pairs,   refit.fitted, refit.threshold, disagree.alpha,
          disagree.beta, agree.alpha,  agree.beta};
}

void write_threshold_trajectory(std::ostream& out, const AdaptiveThresholdSummary& summary) {
  out << "step,time_s,replica,attempt,pairs,fitted,threshold,alpha0,beta0,alpha1,beta1\n";
  for (const ThresholdTrajectoryRow& r : summary.trajectory) {
    // Shortest round-trip forms: the file holds the estimator's values exactly.
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", r.step, to_seconds(r.time), r.replica,
                       r.attempt, r.pairs, r.fitted ? 1 : 0, r.threshold, r.alpha0, r.beta0,
                       r.alpha1, r.beta1);
  }
}

}  // namespace exitsim::sim
