#include "exitsim/policy/adaptive_threshold.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "exit/exit_policies.hpp"

namespace exitsim::policy {
namespace {

// FREE clips confidences into [1e-4, 1 - 1e-4]: the Beta density is unbounded at 0 and 1.
constexpr double k_clip = 1e-4;
// The responsibilities of FREE's supervised E-step, normalised per pair: its own label's 0.2
// against the other's 1e-4 (the clipped zero).
constexpr double k_own_share = 0.2 / (0.2 + 1e-4);
constexpr double k_other_share = 1e-4 / (0.2 + 1e-4);

std::optional<BetaComponent> moments_fit(const CalibrationSums& sums, std::size_t label) {
  const std::size_t other = 1 - label;
  const double weight = k_own_share * static_cast<double>(sums.count[label]) +
                        k_other_share * static_cast<double>(sums.count[other]);
  const double first = k_own_share * sums.sum[label] + k_other_share * sums.sum[other];
  const double second =
      k_own_share * sums.sum_squares[label] + k_other_share * sums.sum_squares[other];
  const double mean = first / weight;
  const double variance = second / weight - mean * mean;
  const double spread = mean * (1.0 - mean);
  // A Beta distribution with this mean has a variance strictly between 0 and m (1 - m).
  if (!(variance > 0.0) || !(variance < spread))
    return std::nullopt;
  const double alpha = mean * (spread / variance - 1.0);
  const double beta = alpha * (1.0 - mean) / mean;
  if (!std::isfinite(alpha) || !std::isfinite(beta) || alpha <= 0.0 || beta <= 0.0)
    return std::nullopt;
  return BetaComponent{alpha, beta};
}

std::string text(double value) {
  return exit::number_text(value);
}

}  // namespace

std::optional<SettingError> check_adaptive_settings(const AdaptiveThresholdSettings& s) {
  const auto in_unit = [](double x) { return std::isfinite(x) && x > 0.0 && x < 1.0; };
  if (!in_unit(s.grid_low))
    return SettingError{"exit_policy.adaptive.grid_low", "a number in (0, 1)", text(s.grid_low)};
  if (!in_unit(s.grid_high) || s.grid_high <= s.grid_low) {
    return SettingError{"exit_policy.adaptive.grid_high",
                        "a number in (grid_low, 1) = (" + text(s.grid_low) + ", 1)",
                        text(s.grid_high)};
  }
  if (s.grid_points < 2) {
    return SettingError{"exit_policy.adaptive.grid_points", "an integer >= 2",
                        std::to_string(s.grid_points)};
  }
  if (!in_unit(s.zeta))
    return SettingError{"exit_policy.adaptive.zeta", "a number in (0, 1)", text(s.zeta)};
  if (s.max_refits < 0) {
    return SettingError{"exit_policy.adaptive.max_refits", "an integer >= 0",
                        std::to_string(s.max_refits)};
  }
  if (s.refit_every < 1) {
    return SettingError{"exit_policy.adaptive.refit_every", "an integer >= 1",
                        std::to_string(s.refit_every)};
  }
  if (!(s.initial_threshold >= 0.0 && s.initial_threshold <= 1.0)) {
    return SettingError{"exit_policy.threshold", "a confidence in [0, 1]",
                        text(s.initial_threshold)};
  }
  return std::nullopt;
}

double BetaComponent::log_density(double x) const {
  const double log_beta_function =
      std::lgamma(alpha) + std::lgamma(beta) - std::lgamma(alpha + beta);
  return (alpha - 1.0) * std::log(x) + (beta - 1.0) * std::log1p(-x) - log_beta_function;
}

void CalibrationSums::add(double confidence, bool agrees) {
  const double x = std::clamp(confidence, k_clip, 1.0 - k_clip);
  const std::size_t label = agrees ? 1 : 0;
  count[label] += 1;
  sum[label] += x;
  sum_squares[label] += x * x;
}

std::optional<BetaMixture> fit_beta_mixture(const CalibrationSums& sums) {
  // Without pairs of both labels the two components fit the same data and the posterior is 1/2
  // everywhere: FREE would then move the threshold to the bottom of its grid (zeta < 1/2) even
  // when every pair disagrees.
  if (sums.count[0] == 0 || sums.count[1] == 0)
    return std::nullopt;
  const std::optional<BetaComponent> disagree = moments_fit(sums, 0);
  const std::optional<BetaComponent> agree = moments_fit(sums, 1);
  if (!disagree || !agree)
    return std::nullopt;
  return BetaMixture{{*disagree, *agree}};
}

double grid_threshold(const BetaMixture& mixture, const AdaptiveThresholdSettings& settings) {
  // numpy's argmax: the first of equal means.
  const int high = mixture.components[1].mean() > mixture.components[0].mean() ? 1 : 0;
  const BetaComponent& top = mixture.components[static_cast<std::size_t>(high)];
  const BetaComponent& low = mixture.components[static_cast<std::size_t>(1 - high)];
  const int n = settings.grid_points;
  const double step = (settings.grid_high - settings.grid_low) / static_cast<double>(n - 1);
  int passing = 0;
  for (int j = 0; j < n; ++j) {
    const double x = settings.grid_low + step * static_cast<double>(j);
    // p_top / (p_top + p_low) = 1 / (1 + exp(log p_low - log p_top)), without overflow.
    const double posterior = 1.0 / (1.0 + std::exp(low.log_density(x) - top.log_density(x)));
    passing += posterior > settings.zeta ? 1 : 0;
  }
  const int index = std::clamp(n - passing, 0, n - 1);
  return settings.grid_low + step * static_cast<double>(index);
}

ThresholdEstimator::ThresholdEstimator(const AdaptiveThresholdSettings& settings)
    : settings_(settings), threshold_(settings.initial_threshold) {}

void ThresholdEstimator::add_pair(double confidence, bool agrees) {
  if (!(confidence >= 0.0 && confidence <= 1.0))
    throw std::invalid_argument("adaptive threshold: a confidence outside [0, 1]");
  sums_.add(confidence, agrees);
}

std::optional<ThresholdRefit> ThresholdEstimator::on_admissions(std::int64_t admitted) {
  if (admitted <= 0)
    return std::nullopt;
  admissions_since_attempt_ += admitted;
  if (admissions_since_attempt_ < settings_.refit_every || attempts_ >= settings_.max_refits ||
      sums_.pairs() == 0) {
    return std::nullopt;
  }
  admissions_since_attempt_ = 0;
  ++attempts_;
  ThresholdRefit refit;
  refit.attempt = attempts_;
  refit.pairs = sums_.pairs();
  if (const std::optional<BetaMixture> fitted = fit_beta_mixture(sums_)) {
    mixture_ = *fitted;
    threshold_ = grid_threshold(mixture_, settings_);
    refit.fitted = true;
  }
  refit.threshold = threshold_;
  refit.mixture = mixture_;
  return refit;
}

}  // namespace exitsim::policy
