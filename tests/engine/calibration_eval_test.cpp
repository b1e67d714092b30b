// engine eval's calibration table and adaptive_threshold rows (issue 45, item 1): every probe
// counted against the reference forward pass, and the adaptive setting measured where its
// estimator learns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/quality_eval.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

using test_support::reference_forward;
using test_support::small_config;
using test_support::small_recursive_depth;
using test_support::small_weights;

class CalibrationEval : public testing::Test {
 protected:
  CalibrationEval()
      : config_(small_config(small_recursive_depth())),
        weights_(small_weights(config_)),
        model_(config_, weights_) {
    for (int t = 0; t < 200; ++t)
      corpus_.push_back(static_cast<std::int32_t>((t * t + 3 * t) % 50));
  }

  ModelConfig config_;
  ModelWeights weights_;
  CpuModel model_;
  std::vector<std::int32_t> corpus_;
};

// Softmax top-1 probability and argmax of one logits row, in double.
std::pair<double, Eigen::Index> top1(const Eigen::RowVectorXf& row) {
  Eigen::Index best = 0;
  const double max = row.cast<double>().maxCoeff(&best);
  double total = 0;
  for (Eigen::Index v = 0; v < row.size(); ++v)
    total += std::exp(double{row(v)} - max);
  return {1.0 / total, best};
}

// The probe of output position k at exit point p is the model's prediction at input row
// context - 1 + k with that row stopped after the point's depth (3 or 5 stack layers) and every
// earlier row at full depth (the oracle run's exact K/V): the reference pass with that one exit
// depth gives its logits. Counted into 20 bins of 0.05 per point, the table must hold exactly
// these tokens and agreements (output position 0 comes from the prefill and is never probed).
TEST_F(CalibrationEval, TheTableCountsEveryProbeAsTheReferencePassPredicts) {
  QualityEvalOptions options;
  options.context = 6;
  options.window = 6;
  options.max_windows = 2;
  const policy::CalibrationTable table = measure_calibration(model_, corpus_, "top1", 20, options);
  ASSERT_EQ(table.exit_points(), 2u);
  const int full = config_.shape.depth.stacked_depth();
  const std::vector<int> point_depths = {3, 5};
  std::vector<std::vector<std::int64_t>> tokens(2, std::vector<std::int64_t>(20, 0));
  std::vector<std::vector<std::int64_t>> agreeing = tokens;
  for (std::int64_t start : {0, 6}) {
    for (std::int64_t k = 1; k < options.window; ++k) {
      const std::int64_t row = options.context - 1 + k;
      const std::vector<std::int32_t> prefix(corpus_.begin() + start,
                                             corpus_.begin() + start + row + 1);
      const auto deep = top1(reference_forward(config_, weights_, prefix).logits.row(row));
      for (std::size_t p = 0; p < 2; ++p) {
        std::vector<int> exits(prefix.size(), full);
        exits.back() = point_depths[p];
        const auto [confidence, argmax] =
            top1(reference_forward(config_, weights_, prefix, exits).logits.row(row));
        const auto bin = std::min<std::size_t>(19, static_cast<std::size_t>(confidence * 20));
        tokens[p][bin] += 1;
        agreeing[p][bin] += argmax == deep.second ? 1 : 0;
      }
    }
  }
  for (std::size_t p = 0; p < 2; ++p) {
    ASSERT_EQ(table.bins(p).size(), 20u);
    std::int64_t total = 0;
    for (std::size_t b = 0; b < 20; ++b) {
      EXPECT_EQ(table.bins(p)[b].tokens, tokens[p][b]) << "point " << p << " bin " << b;
      EXPECT_EQ(table.bins(p)[b].agreeing, agreeing[p][b]) << "point " << p << " bin " << b;
      total += table.bins(p)[b].tokens;
    }
    EXPECT_EQ(total, 10);  // two windows of five probed tokens
  }
}

// An adaptive setting is measured under deferred_fill only (the strategies asked for are
// state_copy and skip_kv), one window at a time (so it refits at each new one), and its row
// reports where the threshold ended.
TEST_F(CalibrationEval, AnAdaptiveSettingIsMeasuredUnderDeferredFillWithItsFinalThreshold) {
  QualityEvalOptions options;
  options.context = 8;
  options.window = 16;
  options.strategies = {policy::SyncStrategy::state_copy, policy::SyncStrategy::skip_kv};
  policy::ExitPolicyParams adaptive;
  adaptive.kind = "adaptive_threshold";
  adaptive.threshold = 0.9;
  const std::vector<policy::ExitPolicyParams> settings = {adaptive};
  const auto results = evaluate_quality(model_, corpus_, settings, options);
  ASSERT_EQ(results.size(), 2u);  // the full-depth baseline and one adaptive row
  EXPECT_FALSE(results[0].final_threshold.has_value());
  const QualityMeasurement& row = results[1];
  EXPECT_EQ(row.strategy, policy::SyncStrategy::deferred_fill);
  ASSERT_TRUE(row.final_threshold.has_value());
  EXPECT_NE(*row.final_threshold, 0.9) << "the estimator never moved on 12 windows";
  // A threshold on FREE's grid 0.3, 0.3667, ..., 0.9.
  const double steps = (*row.final_threshold - 0.3) / (0.6 / 9);
  EXPECT_NEAR(steps, std::round(steps), 1e-9);
}

}  // namespace
}  // namespace exitsim::engine
