#include "exitsim/engine/cpu_ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace exitsim::engine {
namespace {

TEST(CpuOps, RmsNormKnownValues) {
  Matrix x(2, 2);
  x << 3, 4,  //
      0, 0;
  Eigen::VectorXf weight(2);
  weight << 1, 2;
  const Matrix y = rms_norm(x, weight, 0.0f);
  // mean square of (3, 4) is 12.5; 1/sqrt(12.5) = 0.28284271.
  EXPECT_NEAR(y(0, 0), 3 * 0.28284271f, 1e-6);
  EXPECT_NEAR(y(0, 1), 4 * 0.28284271f * 2, 1e-6);
  // eps = 0 on a zero row divides by zero; with eps the row stays zero.
  const Matrix with_eps = rms_norm(x, weight, 1e-6f);
  EXPECT_EQ(with_eps(1, 0), 0.0f);
  EXPECT_EQ(with_eps(1, 1), 0.0f);
}

TEST(CpuOps, RmsNormRejectsMismatchedWeight) {
  const Matrix x = Matrix::Ones(1, 3);
  EXPECT_THROW(rms_norm(x, Eigen::VectorXf::Ones(2), 1e-6f), std::invalid_argument);
  EXPECT_THROW(rms_norm(x, Eigen::VectorXf::Ones(3), -1.0f), std::invalid_argument);
}

TEST(CpuOps, SoftmaxRowsKnownValuesAndLargeLogits) {
  Matrix logits(3, 3);
  const float inf = std::numeric_limits<float>::infinity();
  logits << 0, 0, 0,                      //
      1000, 1000 + std::log(3.0f), -inf,  //
      1, 2, 3;
  const Matrix p = softmax_rows(logits);
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(p(0, c), 1.0f / 3, 1e-7);
  EXPECT_NEAR(p(1, 0), 0.25f, 1e-5);
  EXPECT_NEAR(p(1, 1), 0.75f, 1e-5);
  EXPECT_EQ(p(1, 2), 0.0f);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(p(2, 2), std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(p.row(2).sum(), 1.0f, 1e-6);

  Matrix all_inf(1, 2);
  all_inf << -inf, -inf;
  EXPECT_THROW(softmax_rows(all_inf), std::invalid_argument);
}

TEST(CpuOps, Top2ConfidenceKnownValues) {
  // Probabilities 0.5, 0.25, 0.25 from logits log(2), 0, 0 (shifted by a large constant).
  const std::vector<float> logits = {500.0f, 500.0f + std::log(2.0f), 500.0f};
  const Top2Confidence c = top2_confidence(logits);
  EXPECT_EQ(c.top1_index, 1);
  EXPECT_NEAR(c.top1_prob, 0.5f, 1e-4);
  EXPECT_NEAR(c.margin, 0.25f, 1e-4);

  const std::vector<float> tie = {1.0f, 3.0f, 3.0f};
  const Top2Confidence t = top2_confidence(tie);
  EXPECT_EQ(t.top1_index, 1) << "the lowest index wins a tie";
  EXPECT_EQ(t.margin, 0.0f);

  const std::vector<float> single = {-7.0f};
  const Top2Confidence s = top2_confidence(single);
  EXPECT_EQ(s.top1_index, 0);
  EXPECT_EQ(s.top1_prob, 1.0f);
  EXPECT_EQ(s.margin, 1.0f);
}

TEST(CpuOps, Top2ConfidenceMatchesSoftmax) {
  Matrix logits(1, 6);
  logits << 0.3f, -1.2f, 2.5f, 2.4f, -30.0f, 0.0f;
  const Matrix p = softmax_rows(logits);
  const Top2Confidence c = top2_confidence({logits.data(), 6});
  EXPECT_EQ(c.top1_index, 2);
  EXPECT_NEAR(c.top1_prob, p(0, 2), 1e-7);
  EXPECT_NEAR(c.margin, p(0, 2) - p(0, 3), 1e-7);
}

TEST(CpuOps, Top2ConfidenceRejectsDegenerateInput) {
  EXPECT_THROW(top2_confidence({}), std::invalid_argument);
  const std::vector<float> all_inf(3, -std::numeric_limits<float>::infinity());
  EXPECT_THROW(top2_confidence(all_inf), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::engine
