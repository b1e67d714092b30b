#include "exitsim/analysis/pareto.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace exitsim::analysis {
namespace {

// Throughput (more is better) against NLL per byte (less is better).
const std::vector<Objective> k_objectives = {{"throughput", true}, {"nll", false}};

TEST(Pareto, RanksFrontsAndOrdersTheFrontier) {
  const std::vector<ParetoPoint> points = {
      {"static", {100, 1.00}},    // best quality
      {"exit 0.9", {150, 1.02}},  // on the frontier
      {"exit 0.5", {220, 1.10}},  // fastest
      {"worse", {140, 1.05}},     // dominated by "exit 0.9"
      {"worst", {90, 1.20}},      // dominated by everything on the frontier and by "worse"
      {"twin", {150, 1.02}},      // equal to "exit 0.9": neither dominates
  };
  const std::vector<int> rank = pareto_ranks(points, k_objectives);
  EXPECT_EQ(rank, (std::vector<int>{0, 0, 0, 1, 2, 0}));
  const std::vector<std::size_t> front = pareto_frontier(points, k_objectives);
  EXPECT_EQ(front, (std::vector<std::size_t>{0, 1, 5, 2}));
}

TEST(Pareto, NonFinitePointsAreNeverOnTheFrontier) {
  const std::vector<ParetoPoint> points = {{"ok", {100, 1.0}}, {"failed", {std::nan(""), 0.5}}};
  EXPECT_TRUE(dominates(points[0], points[1], k_objectives));
  EXPECT_FALSE(dominates(points[1], points[0], k_objectives));
  EXPECT_EQ(pareto_frontier(points, k_objectives), (std::vector<std::size_t>{0}));
}

TEST(Pareto, HypervolumeIsTheDominatedArea) {
  const std::vector<ParetoPoint> points = {
      {"a", {100, 1.0}}, {"b", {200, 1.5}}, {"dominated", {150, 1.6}}};
  const std::vector<double> reference = {0, 2.0};
  // a: [0,100] x [1.0,2.0] = 100; b adds [100,200] x [1.5,2.0] = 50.
  EXPECT_DOUBLE_EQ(hypervolume_2d(points, k_objectives, reference), 150.0);
  // A point no better than the reference adds nothing.
  EXPECT_DOUBLE_EQ(hypervolume_2d(std::vector<ParetoPoint>{{"x", {0, 3}}}, k_objectives, reference),
                   0.0);
  EXPECT_THROW(hypervolume_2d(points, std::vector<Objective>{{"t", true}}, reference),
               std::invalid_argument);
}

TEST(Pareto, RefusesPointsOfTheWrongWidth) {
  const std::vector<ParetoPoint> points = {{"short", {1}}};
  EXPECT_THROW(pareto_ranks(points, k_objectives), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::analysis
