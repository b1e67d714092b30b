// cost_model.step_variability: a calibrated profile's measured spread of the engine's steps
// around their price, drawn per iteration by the simulator (seeded), so that simulated steps keep
// their median price and the engine's mean.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/engine_ops.hpp"
#include "support/op_fits.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

namespace ops = traces::engine_ops;

struct SimRun {
  std::vector<TimeNs> iterations;
  std::vector<std::string> warnings;
};

// The default scenario's model, priced by a profile of linear ops with the given step spread.
SimRun simulate_with(const test_support::TempDir& dir, const std::vector<double>& spread,
                     bool variability = true, double price_scale = 1.0) {
  const scenario::Scenario base = scenario::load_default_scenario();
  CostProfile profile;
  profile.source = {"exitsim-engine", "cpu", "test cpu", "m", model_fingerprint(base.model.shape),
                    {"t.csv"}};
  for (const std::string_view name : ops::layer)
    profile.ops.push_back(test_support::linear_fit(name, 1, 0.1));
  profile.ops.push_back(test_support::linear_fit(ops::embed, 2, 0));
  profile.ops.push_back(test_support::linear_fit(ops::lm_head, 10, 1));
  profile.ops.push_back(test_support::linear_fit(ops::sampling, 3, 0));
  profile.ops.push_back(test_support::linear_fit(ops::step_residual, 50, 0));
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const OpFit& a, const OpFit& b) { return a.name < b.name; });
  profile.step_variability = spread;
  const std::string path = dir.path("profile.json");
  profile.write(path);
  const std::vector<std::string> overrides = {
      "cost_model.kind=calibrated",
      "cost_model.profile=" + path,
      "hardware.name=\"test cpu\"",
      "workload.requests=40",
      "workload.arrivals.rate=1000000",
      std::string("cost_model.step_variability=") + (variability ? "true" : "false"),
      fmt::format("cost_model.price_scale={}", price_scale)};
  const scenario::Scenario s = scenario::load_default_scenario(overrides);
  SimulationConfig config = simulation_config_from(s, "");
  SimRun run;
  config.iteration_observer = [&](const IterationRecord& it) {
    run.iterations.push_back(it.duration);
  };
  const auto workload = make_workload(s.workload, s.seed);
  run.warnings = simulate(config, *workload).summary.warnings;
  return run;
}

std::vector<double> constant(double factor) {
  return std::vector<double>(21, factor);
}

TEST(StepVariability, EveryIterationTakesTheDrawnFactorOfItsPrice) {
  const test_support::TempDir dir;
  const SimRun priced = simulate_with(dir, constant(1.0), /*variability=*/false);
  // A spread that is 2.0 everywhere doubles every iteration (the schedule is the same: only
  // arrival timing could change it, and every request has arrived within the first step).
  const SimRun doubled = simulate_with(dir, constant(2.0));
  ASSERT_FALSE(priced.iterations.empty());
  const double priced_total =
      std::accumulate(priced.iterations.begin(), priced.iterations.end(), 0.0);
  const double doubled_total =
      std::accumulate(doubled.iterations.begin(), doubled.iterations.end(), 0.0);
  ASSERT_EQ(doubled.iterations.size(), priced.iterations.size());
  for (std::size_t i = 0; i < priced.iterations.size(); ++i)
    EXPECT_NEAR(static_cast<double>(doubled.iterations[i]),
                2.0 * static_cast<double>(priced.iterations[i]), 1.0);
  EXPECT_NEAR(doubled_total / priced_total, 2.0, 1e-6);
  // Off, or a spread of 1.0, prices every iteration as it is.
  const SimRun unit = simulate_with(dir, constant(1.0));
  EXPECT_EQ(unit.iterations, priced.iterations);
}

TEST(StepVariability, DrawsAreSeededAndFollowTheSpread) {
  const test_support::TempDir dir;
  // Quantiles 1.0, 1.1, ..., 3.0: factors uniform on [1, 3], mean 2.
  std::vector<double> spread;
  for (int q = 0; q <= 20; ++q)
    spread.push_back(1.0 + 0.1 * q);
  const SimRun a = simulate_with(dir, spread);
  const SimRun b = simulate_with(dir, spread);
  EXPECT_EQ(a.iterations, b.iterations);  // deterministic: the same seed, the same draws
  const SimRun priced = simulate_with(dir, spread, /*variability=*/false);
  // The factor of every iteration (the schedules line up: every request arrived at once): all
  // within [1, 3], spread over it, with a mean near 2 (uniform draws over about 100 steps).
  ASSERT_EQ(a.iterations.size(), priced.iterations.size());
  std::vector<double> factors;
  for (std::size_t i = 0; i < a.iterations.size(); ++i)
    factors.push_back(static_cast<double>(a.iterations[i]) /
                      static_cast<double>(priced.iterations[i]));
  for (const double f : factors) {
    EXPECT_GE(f, 0.99);
    EXPECT_LE(f, 3.01);
  }
  EXPECT_GT(*std::max_element(factors.begin(), factors.end()) -
                *std::min_element(factors.begin(), factors.end()),
            1.5);
  const double mean =
      std::accumulate(factors.begin(), factors.end(), 0.0) / static_cast<double>(factors.size());
  // Uniform on [1, 3]: standard deviation 0.577, so the mean of n draws is within 4 standard
  // errors of 2.
  EXPECT_NEAR(mean, 2.0, 4 * 0.577 / std::sqrt(static_cast<double>(factors.size())));
}

TEST(StepVariability, AProfileWithoutAMeasuredSpreadSaysSo) {
  const test_support::TempDir dir;
  const SimRun run = simulate_with(dir, {});
  EXPECT_TRUE(std::any_of(run.warnings.begin(), run.warnings.end(), [](const std::string& w) {
    return w.find("no measured step spread") != std::string::npos;
  }));
  const SimRun off = simulate_with(dir, {}, /*variability=*/false);
  EXPECT_TRUE(std::none_of(off.warnings.begin(), off.warnings.end(), [](const std::string& w) {
    return w.find("no measured step spread") != std::string::npos;
  }));
}

bool names_price_scale(const SimRun& run) {
  return std::any_of(run.warnings.begin(), run.warnings.end(), [](const std::string& w) {
    return w.find("cost_model.price_scale") != std::string::npos;
  });
}

TEST(PriceScale, EveryIterationTakesTheScaleAndTheRunSaysSo) {
  const test_support::TempDir dir;
  const SimRun priced = simulate_with(dir, {}, /*variability=*/false);
  const SimRun slower = simulate_with(dir, {}, /*variability=*/false, 1.25);
  ASSERT_FALSE(priced.iterations.empty());
  ASSERT_EQ(slower.iterations.size(), priced.iterations.size());
  for (std::size_t i = 0; i < priced.iterations.size(); ++i)
    EXPECT_NEAR(static_cast<double>(slower.iterations[i]),
                1.25 * static_cast<double>(priced.iterations[i]), 1.0);
  EXPECT_TRUE(names_price_scale(slower));
  EXPECT_FALSE(names_price_scale(priced));
}

TEST(PriceScale, MultipliesTheDrawnFactor) {
  const test_support::TempDir dir;
  const SimRun priced = simulate_with(dir, {}, /*variability=*/false);
  // 2.0 drawn times 0.75: 1.5 (a product of 1 would also pass with both ignored).
  const SimRun both = simulate_with(dir, constant(2.0), /*variability=*/true, 0.75);
  ASSERT_EQ(both.iterations.size(), priced.iterations.size());
  for (std::size_t i = 0; i < priced.iterations.size(); ++i)
    EXPECT_NEAR(static_cast<double>(both.iterations[i]),
                1.5 * static_cast<double>(priced.iterations[i]), 1.0);
}

}  // namespace
}  // namespace exitsim::sim
