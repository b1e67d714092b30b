#include "exitsim/analysis/pareto.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace exitsim::analysis {

namespace {

// The value turned so that more is always better.
double gain(const ParetoPoint& p, std::span<const Objective> objectives, std::size_t k) {
  const double v = p.values[k];
  return objectives[k].maximize ? v : -v;
}

bool finite(const ParetoPoint& p) {
  return std::all_of(p.values.begin(), p.values.end(), [](double v) { return std::isfinite(v); });
}

void check_sizes(std::span<const ParetoPoint> points, std::span<const Objective> objectives) {
  for (const ParetoPoint& p : points) {
    if (p.values.size() != objectives.size())
      throw std::invalid_argument("pareto: point " + p.label + " has the wrong number of values");
  }
}

}  // namespace

bool dominates(const ParetoPoint& a, const ParetoPoint& b, std::span<const Objective> objectives) {
  if (!finite(a))
    return false;
  if (!finite(b))
    return true;
  bool better = false;
  for (std::size_t k = 0; k < objectives.size(); ++k) {
    const double x = gain(a, objectives, k);
    const double y = gain(b, objectives, k);
    if (x < y)
      return false;
    better = better || x > y;
  }
  return better;
}

std::vector<int> pareto_ranks(std::span<const ParetoPoint> points,
                              std::span<const Objective> objectives) {
  check_sizes(points, objectives);
  const std::size_t n = points.size();
  std::vector<std::vector<std::size_t>> dominated(n);
  std::vector<int> dominators(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j && dominates(points[i], points[j], objectives)) {
        dominated[i].push_back(j);
        ++dominators[j];
      }
    }
  }
  std::vector<int> rank(n, -1);
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < n; ++i) {
    if (dominators[i] == 0)
      front.push_back(i);
  }
  for (int r = 0; !front.empty(); ++r) {
    std::vector<std::size_t> next;
    for (const std::size_t i : front) {
      rank[i] = r;
      for (const std::size_t j : dominated[i]) {
        if (--dominators[j] == 0)
          next.push_back(j);
      }
    }
    front = std::move(next);
  }
  return rank;
}

std::vector<std::size_t> pareto_frontier(std::span<const ParetoPoint> points,
                                         std::span<const Objective> objectives) {
  const std::vector<int> rank = pareto_ranks(points, objectives);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (rank[i] == 0 && finite(points[i]))
      out.push_back(i);
  }
  if (!objectives.empty()) {
    std::stable_sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
      return gain(points[a], objectives, 0) < gain(points[b], objectives, 0);
    });
  }
  return out;
}

double hypervolume_2d(std::span<const ParetoPoint> points, std::span<const Objective> objectives,
                      std::span<const double> reference) {
  if (objectives.size() != 2 || reference.size() != 2)
    throw std::invalid_argument("hypervolume_2d: needs exactly two objectives and a reference");
  const ParetoPoint ref{"reference", {reference[0], reference[1]}};
  const double rx = gain(ref, objectives, 0);
  const double ry = gain(ref, objectives, 1);
  // Frontier points better than the reference, by the first objective descending: each adds the
  // strip between its second-objective value and the best seen so far.
  std::vector<std::pair<double, double>> front;
  for (const std::size_t i : pareto_frontier(points, objectives)) {
    const double x = gain(points[i], objectives, 0);
    const double y = gain(points[i], objectives, 1);
    if (x > rx && y > ry)
      front.emplace_back(x, y);
  }
  std::sort(front.begin(), front.end(), std::greater<>());
  double volume = 0;
  double best_y = ry;
  for (const auto& [x, y] : front) {
    if (y > best_y) {
      volume += (x - rx) * (y - best_y);
      best_y = y;
    }
  }
  return volume;
}

}  // namespace exitsim::analysis
