#pragma once

// FREE's adaptive threshold estimator (Bae et al., EMNLP 2023; PAPERS.md A1): the confidence
// threshold of `exit_policy.kind: adaptive_threshold` is not fixed but re-estimated while the
// system serves. At every synchronized parallel-decoding event (a deferred_fill pass whose states
// reach the top) the executor learns, for each token of the pass, whether the prediction it made
// at its exit point agrees with the full-depth prediction: one calibration pair (confidence,
// agrees) per token. At request admissions the estimator fits a two-component Beta mixture to
// all pairs so far (component 0: tokens that disagree, 1: that agree) and moves the threshold to
// the lowest confidence on a grid from which the agreeing component explains the confidence with
// posterior above zeta. Like every policy here it is a pure state machine: the engine feeds it
// real confidences and deep predictions, the simulator pairs drawn from a calibration table
// (calibration_table.hpp); fed the same pairs at the same admissions, both reach the same
// thresholds bit for bit. Semantics and the differences from the authors' code:
// docs/exit_policies.md, "adaptive_threshold".

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace exitsim::policy {

// The estimator's scenario keys (exit_policy.adaptive.*), with FREE's values as defaults.
struct AdaptiveThresholdSettings {
  double initial_threshold = 0.9;  // until the first refit (FREE: shallow2deep_conf_threshold)
  double grid_low = 0.3;  // the grid the threshold moves on (FREE: predict_proba(0.3, 0.9))
  double grid_high = 0.9;
  int grid_points = 10;  // >= 2, evenly spaced from grid_low to grid_high inclusive
  double zeta = 0.4;     // posterior level of the agreeing component
  int max_refits = 300;  // update budget (FREE: bmm_update_max_iter); after it the threshold stays
  int refit_every = 1;   // admitted requests between refit attempts (FREE: every new sample)

  friend bool operator==(const AdaptiveThresholdSettings&,
                         const AdaptiveThresholdSettings&) = default;
};

// Checks the settings; returns the scenario key at fault ("exit_policy.adaptive.zeta", ...) and
// an "expected X, found Y" message, or nullopt when they are valid.
struct SettingError {
  std::string key;
  std::string expected;
  std::string found;
};
std::optional<SettingError> check_adaptive_settings(const AdaptiveThresholdSettings& settings);

struct BetaComponent {
  double alpha = 1.0;
  double beta = 1.0;

  double mean() const { return alpha / (alpha + beta); }
  // log of the Beta(alpha, beta) density at x in (0, 1).
  double log_density(double x) const;
  friend bool operator==(const BetaComponent&, const BetaComponent&) = default;
};

// Component 0 models the tokens whose exit prediction disagrees with the deep one, 1 those that
// agree; FREE's initial parameters (alpha = [1, 2], beta = [2, 1]).
struct BetaMixture {
  std::array<BetaComponent, 2> components{BetaComponent{1.0, 2.0}, BetaComponent{2.0, 1.0}};
  friend bool operator==(const BetaMixture&, const BetaMixture&) = default;
};

// The sufficient statistics of the supervised fit: per label (0 disagrees, 1 agrees) the pair
// count and the sums of the (clipped) confidences and of their squares. FREE refits on every
// pair collected so far; its supervised EM depends on the pairs only through these sums, so the
// estimator keeps them instead of the pairs.
struct CalibrationSums {
  std::array<std::int64_t, 2> count{};
  std::array<double, 2> sum{};
  std::array<double, 2> sum_squares{};

  void add(double confidence, bool agrees);
  std::int64_t pairs() const { return count[0] + count[1]; }
  friend bool operator==(const CalibrationSums&, const CalibrationSums&) = default;
};

// One iteration of FREE's supervised EM: the labels, not the current parameters, give the
// responsibilities (a pair's own component gets 0.2 / 0.2001 of it, the other 0.0001 / 0.2001:
// the authors' clipping at 1e-4 of the one-hot label scaled by 0.2), and each component's alpha
// and beta come from the weighted mean m and variance v by the method of moments:
// alpha = m (m (1 - m) / v - 1), beta = alpha (1 - m) / m. nullopt when a label has no pairs or
// a component's moments admit no Beta distribution (v = 0 or v >= m (1 - m)): the authors' code
// would produce NaN parameters there.
std::optional<BetaMixture> fit_beta_mixture(const CalibrationSums& sums);

// FREE's grid rule (BetaMixture1D.predict_proba): on the grid, the points where the component
// of the higher mean has posterior above zeta against the other (equal priors); with c of the
// n points passing, the threshold is grid point n - c (0-based, clamped to [0, n - 1]), i.e. the
// lowest point from which on all points pass when the posterior rises with the confidence.
double grid_threshold(const BetaMixture& mixture, const AdaptiveThresholdSettings& settings);

// What one refit attempt did, for the run's threshold trajectory.
struct ThresholdRefit {
  int attempt = 0;         // 1-based, counts against max_refits
  std::int64_t pairs = 0;  // calibration pairs it saw
  bool fitted = false;     // false: the mixture was degenerate and the threshold stayed
  double threshold = 0.0;  // the threshold from now on
  BetaMixture mixture;     // the fitted mixture (the previous one when not fitted)
};

class ThresholdEstimator {
 public:
  explicit ThresholdEstimator(const AdaptiveThresholdSettings& settings);

  double threshold() const { return threshold_; }
  const CalibrationSums& sums() const { return sums_; }
  int attempts() const { return attempts_; }

  // One calibration pair from a synchronized parallel-decoding event. Confidences outside
  // [0, 1] are an executor bug (std::invalid_argument).
  void add_pair(double confidence, bool agrees);

  // `admitted` requests were admitted at this step. Every refit_every admissions, while the
  // budget lasts and pairs exist, the estimator refits once (several admissions in one step give
  // one attempt: the pairs are the same) and returns what it did.
  std::optional<ThresholdRefit> on_admissions(std::int64_t admitted);

  friend bool operator==(const ThresholdEstimator&, const ThresholdEstimator&) = default;

 private:
  AdaptiveThresholdSettings settings_;
  CalibrationSums sums_;
  BetaMixture mixture_;
  double threshold_ = 0.0;
  int attempts_ = 0;
  std::int64_t admissions_since_attempt_ = 0;
};

}  // namespace exitsim::policy
