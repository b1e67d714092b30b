// FREE's adaptive threshold estimator (policy/adaptive_threshold.hpp): the supervised EM against
// a method-of-moments fit worked out by hand, the authors' grid rule on mixtures whose posterior
// is known in closed form, and the estimator's cadence, budget and degenerate cases.

#include "exitsim/policy/adaptive_threshold.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace exitsim::policy {
namespace {

// Grid points 0.3 + j * 0.6 / 9, j = 0..9 (FREE's predict_proba(0.3, 0.9) grid of 10).
double grid_point(int j) {
  return 0.3 + j * (0.6 / 9.0);
}

TEST(AdaptiveThreshold, EmFitsEachComponentByWeightedMomentsWithTheLabelsWeighted2000To1) {
  CalibrationSums sums;
  sums.add(0.6, true);
  sums.add(0.8, true);
  sums.add(0.2, false);
  sums.add(0.4, false);
  // By hand: a pair weighs 0.2 in its own label's component and 1e-4 in the other's (2000:1).
  // Agreeing component: weights 2000 on {0.6, 0.8}, 1 on {0.2, 0.4}:
  //   m = (2000 * 1.4 + 0.6) / 4002 = 2800.6 / 4002 = 0.69980009995...
  //   E[x^2] = (2000 * (0.36 + 0.64) + (0.04 + 0.16)) / 4002 = 2000.2 / 4002
  //   v = E[x^2] - m^2 = 0.01007992006
  //   alpha = m (m (1 - m) / v - 1) = 13.8850327..., beta = alpha (1 - m) / m = 5.9563944...
  // (without the other label's 1/2001 share: m = 0.7, v = 0.01, alpha = 14, beta = 6).
  // The disagreeing component is the mirror image (x -> 1 - x): alpha and beta swap.
  const std::optional<BetaMixture> fitted = fit_beta_mixture(sums);
  ASSERT_TRUE(fitted.has_value());
  const BetaComponent& agree = fitted->components[1];
  const BetaComponent& disagree = fitted->components[0];
  EXPECT_NEAR(agree.alpha, 13.885032734, 1e-8);
  EXPECT_NEAR(agree.beta, 5.956394461, 1e-8);
  EXPECT_NEAR(disagree.alpha, 5.956394461, 1e-8);
  EXPECT_NEAR(disagree.beta, 13.885032734, 1e-8);
  EXPECT_NEAR(agree.mean(), 2800.6 / 4002.0, 1e-12);
}

TEST(AdaptiveThreshold, EmRefusesOneLabelAndZeroVariance) {
  CalibrationSums agreeing_only;
  agreeing_only.add(0.6, true);
  agreeing_only.add(0.8, true);
  EXPECT_FALSE(fit_beta_mixture(agreeing_only).has_value());
  // Every pair at one confidence: each component's weighted variance is 0, no Beta has it.
  CalibrationSums constant;
  constant.add(0.5, true);
  constant.add(0.5, false);
  constant.add(0.5, true);
  EXPECT_FALSE(fit_beta_mixture(constant).has_value());
}

TEST(AdaptiveThreshold, GridRulePicksTheFirstPointWhosePosteriorExceedsZeta) {
  // FREE's initial mixture: Beta(1, 2) (density 2 (1 - x)) and Beta(2, 1) (density 2 x), so the
  // agreeing component's posterior is exactly x. zeta = 0.4: points 0.4333.. (j = 2) to 0.9
  // pass (8 of 10), threshold = point 10 - 8 = 2. zeta = 0.55: from 0.5667 (j = 4), 6 pass.
  AdaptiveThresholdSettings settings;
  settings.zeta = 0.4;
  EXPECT_NEAR(grid_threshold(BetaMixture{}, settings), grid_point(2), 1e-12);
  settings.zeta = 0.55;
  EXPECT_NEAR(grid_threshold(BetaMixture{}, settings), grid_point(4), 1e-12);
  // Above every point's posterior (0.9 at most): none passes, the index clamps to the top.
  settings.zeta = 0.95;
  EXPECT_NEAR(grid_threshold(BetaMixture{}, settings), grid_point(9), 1e-12);
}

TEST(AdaptiveThreshold, GridRuleCountsPassingPointsWhenThePosteriorIsNotMonotone) {
  // Beta(5, 5) (mean 0.5) against Beta(1, 1.2) (mean 0.4545): the peaked component wins in the
  // middle only. Posteriors of Beta(5, 5) on the grid (densities 630 x^4 (1-x)^4 and
  // 1.2 (1-x)^0.2): 0.523, 0.626, 0.681, 0.702, 0.693, 0.651, 0.565, 0.418, 0.219, 0.052.
  // zeta = 0.6: j = 1..5 pass (5 points); the authors' rule takes point 10 - 5 = 5 (0.6333),
  // not the first passing one (0.3667). zeta = 0.4: j = 0..7 pass, point 2.
  const BetaMixture mixture{{BetaComponent{1.0, 1.2}, BetaComponent{5.0, 5.0}}};
  AdaptiveThresholdSettings settings;
  settings.zeta = 0.6;
  EXPECT_NEAR(grid_threshold(mixture, settings), grid_point(5), 1e-12);
  settings.zeta = 0.4;
  EXPECT_NEAR(grid_threshold(mixture, settings), grid_point(2), 1e-12);
}

// Pairs whose fit is FREE's initial mixture's shape: agreeing high, disagreeing low.
void add_separated_pairs(ThresholdEstimator& estimator) {
  estimator.add_pair(0.6, true);
  estimator.add_pair(0.8, true);
  estimator.add_pair(0.2, false);
  estimator.add_pair(0.4, false);
}

TEST(AdaptiveThreshold, EstimatorRefitsEveryRefitEveryAdmissionsOncePerStep) {
  AdaptiveThresholdSettings settings;
  settings.refit_every = 2;
  ThresholdEstimator estimator(settings);
  EXPECT_EQ(estimator.threshold(), 0.9);  // the initial threshold until the first refit
  add_separated_pairs(estimator);
  EXPECT_FALSE(estimator.on_admissions(1).has_value());  // 1 of 2 admissions
  EXPECT_FALSE(estimator.on_admissions(0).has_value());  // a step without admissions
  const std::optional<ThresholdRefit> refit = estimator.on_admissions(1);
  ASSERT_TRUE(refit.has_value());
  EXPECT_EQ(refit->attempt, 1);
  EXPECT_EQ(refit->pairs, 4);
  EXPECT_TRUE(refit->fitted);
  EXPECT_EQ(refit->threshold, estimator.threshold());
  EXPECT_EQ(refit->mixture, fit_beta_mixture(estimator.sums()).value());
  // Five admissions in one step are one attempt: the pairs are the same.
  const std::optional<ThresholdRefit> next = estimator.on_admissions(5);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->attempt, 2);
  EXPECT_EQ(estimator.attempts(), 2);
}

TEST(AdaptiveThreshold, EstimatorStopsAtItsBudgetAndNeedsPairs) {
  AdaptiveThresholdSettings settings;
  settings.max_refits = 1;
  ThresholdEstimator estimator(settings);
  // No pair yet: no attempt is spent.
  EXPECT_FALSE(estimator.on_admissions(1).has_value());
  EXPECT_EQ(estimator.attempts(), 0);
  add_separated_pairs(estimator);
  ASSERT_TRUE(estimator.on_admissions(1).has_value());
  const double after_budget = estimator.threshold();
  estimator.add_pair(0.95, false);
  EXPECT_FALSE(estimator.on_admissions(1).has_value());  // budget of 1 spent
  EXPECT_EQ(estimator.threshold(), after_budget);
}

TEST(AdaptiveThreshold, DegenerateRefitKeepsTheThresholdAndSaysSo) {
  AdaptiveThresholdSettings settings;
  settings.initial_threshold = 0.75;
  ThresholdEstimator estimator(settings);
  estimator.add_pair(0.6, true);
  estimator.add_pair(0.8, true);  // one label only
  const std::optional<ThresholdRefit> refit = estimator.on_admissions(1);
  ASSERT_TRUE(refit.has_value());
  EXPECT_FALSE(refit->fitted);
  EXPECT_EQ(refit->threshold, 0.75);
  EXPECT_EQ(refit->mixture, BetaMixture{});  // the previous (initial) mixture
  EXPECT_EQ(refit->attempt, 1);              // it still counts against the budget
}

TEST(AdaptiveThreshold, EstimatorRefusesConfidencesOutsideTheUnitInterval) {
  ThresholdEstimator estimator(AdaptiveThresholdSettings{});
  EXPECT_THROW(estimator.add_pair(1.5, true), std::invalid_argument);
  EXPECT_THROW(estimator.add_pair(std::nan(""), true), std::invalid_argument);
}

TEST(AdaptiveThreshold, SettingsErrorsNameTheKey) {
  AdaptiveThresholdSettings settings;
  settings.grid_high = 0.2;
  const std::optional<SettingError> error = check_adaptive_settings(settings);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->key, "exit_policy.adaptive.grid_high");
  EXPECT_EQ(error->found, "0.2");
  settings = AdaptiveThresholdSettings{};
  settings.refit_every = 0;
  EXPECT_EQ(check_adaptive_settings(settings)->key, "exit_policy.adaptive.refit_every");
  EXPECT_FALSE(check_adaptive_settings(AdaptiveThresholdSettings{}).has_value());
}

}  // namespace
}  // namespace exitsim::policy
