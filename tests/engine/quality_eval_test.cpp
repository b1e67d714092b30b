// engine eval's measurements: the full-depth NLL against the reference forward pass, and the
// orderings a confidence threshold must show.
#include "exitsim/engine/quality_eval.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

using test_support::reference_forward;
using test_support::small_config;
using test_support::small_recursive_depth;
using test_support::small_weights;

class QualityEval : public testing::Test {
 protected:
  QualityEval()
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

policy::ExitPolicyParams confidence(double threshold) {
  policy::ExitPolicyParams p;
  p.kind = "confidence";
  p.threshold = threshold;
  return p;
}

TEST_F(QualityEval, FullDepthNllIsTheReferenceModelsNll) {
  QualityEvalOptions options;
  options.context = 16;
  options.window = 40;
  const auto results = evaluate_quality(model_, corpus_, {}, options);
  ASSERT_EQ(results.size(), 1u);
  const QualityMeasurement& full = results[0];
  double nll = 0;
  std::int64_t tokens = 0;
  for (std::int64_t start = 0; start + 56 <= 200; start += 40) {
    const std::vector<std::int32_t> window(corpus_.begin() + start, corpus_.begin() + start + 56);
    const auto ref = reference_forward(config_, weights_, window);
    for (Eigen::Index row = 15; row < 55; ++row) {
      const Eigen::RowVectorXd l = ref.logits.row(row).cast<double>();
      const double max = l.maxCoeff();
      nll += std::log((l.array() - max).exp().sum()) + max -
             l[window[static_cast<std::size_t>(row + 1)]];
      ++tokens;
    }
  }
  EXPECT_EQ(full.tokens, tokens);
  EXPECT_NEAR(full.nll_per_token, nll / static_cast<double>(tokens), 1e-5);
  EXPECT_DOUBLE_EQ(full.top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(full.mean_exit_depth, 7.0);
}

TEST_F(QualityEval, AHigherThresholdExitsLaterAndAgreesMore) {
  QualityEvalOptions options;
  options.context = 16;
  options.window = 40;
  const std::vector<policy::ExitPolicyParams> settings = {confidence(0.3), confidence(0.9)};
  const auto results = evaluate_quality(model_, corpus_, settings, options);
  ASSERT_EQ(results.size(), 3u);
  const QualityMeasurement& low = results[1];
  const QualityMeasurement& high = results[2];
  EXPECT_LT(low.mean_exit_depth, high.mean_exit_depth);
  EXPECT_LE(low.top1_agreement, high.top1_agreement);
  EXPECT_LT(low.mean_exit_depth, 7.0);
  for (const QualityMeasurement& m : results) {
    EXPECT_NEAR(std::accumulate(m.exit_distribution.begin(), m.exit_distribution.end(), 0.0), 1.0,
                1e-12);
  }
}

TEST_F(QualityEval, EachStrategyIsMeasuredOnItsOwn) {
  // The K/V later tokens attend over differs by strategy, so quality does: state_copy computes
  // the skipped layers' K/V, skip_kv leaves it out.
  QualityEvalOptions options;
  options.context = 16;
  options.window = 40;
  options.strategies = {policy::SyncStrategy::state_copy, policy::SyncStrategy::skip_kv};
  const std::vector<policy::ExitPolicyParams> settings = {confidence(0.3)};
  const auto results = evaluate_quality(model_, corpus_, settings, options);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].strategy, policy::SyncStrategy::full_depth);
  EXPECT_EQ(results[1].strategy, policy::SyncStrategy::state_copy);
  EXPECT_EQ(results[2].strategy, policy::SyncStrategy::skip_kv);
  EXPECT_LT(results[1].mean_exit_depth, 7.0);
  EXPECT_NE(results[1].nll_per_token, results[2].nll_per_token);
}

TEST_F(QualityEval, TooShortATextIsAUserError) {
  QualityEvalOptions options;
  options.context = 150;
  options.window = 100;
  EXPECT_THROW(evaluate_quality(model_, corpus_, {}, options), InputError);
}

}  // namespace
}  // namespace exitsim::engine
