#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace exitsim::analysis {

// One axis of the trade-off: a metric and whether more is better (throughput, agreement) or
// less (NLL, TPOT p99, cost per million tokens).
struct Objective {
  std::string metric;
  bool maximize = false;
};

// One configuration's values, in the order of the objectives.
struct ParetoPoint {
  std::string label;
  std::vector<double> values;
};

// Whether a is at least as good as b on every objective and better on one. Values that are not
// finite never dominate and are dominated by every finite point.
bool dominates(const ParetoPoint& a, const ParetoPoint& b, std::span<const Objective> objectives);

// Non-dominated sorting (NSGA-II's fronts): rank 0 is the Pareto frontier, rank 1 the frontier
// of what is left without it, and so on. O(n^2 m), fine for the thousands of runs of a sweep.
// Throws std::invalid_argument when a point has not one value per objective.
std::vector<int> pareto_ranks(std::span<const ParetoPoint> points,
                              std::span<const Objective> objectives);

// Indices of the frontier (rank 0), ordered by the first objective from worst to best.
std::vector<std::size_t> pareto_frontier(std::span<const ParetoPoint> points,
                                         std::span<const Objective> objectives);

// The area the frontier dominates over two objectives, bounded by `reference` (a point worse than
// every frontier point on both axes, e.g. the worst value seen on each); points not better than
// the reference on both add nothing. Throws std::invalid_argument unless there are exactly two
// objectives.
double hypervolume_2d(std::span<const ParetoPoint> points, std::span<const Objective> objectives,
                      std::span<const double> reference);

}  // namespace exitsim::analysis
