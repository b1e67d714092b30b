#include "exitsim/engine/cpu_ops.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace exitsim::engine {

Matrix rms_norm(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Eigen::VectorXf>& weight,
                float eps) {
  if (weight.size() != x.cols()) {
    throw std::invalid_argument("rms_norm: weight has " + std::to_string(weight.size()) +
                                " entries for rows of " + std::to_string(x.cols()));
  }
  if (!(eps >= 0))
    throw std::invalid_argument("rms_norm: eps must be non-negative");
  Matrix y(x.rows(), x.cols());
  if (x.cols() == 0)
    return y;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double mean_square =
        x.row(r).cast<double>().squaredNorm() / static_cast<double>(x.cols());
    const double scale = 1.0 / std::sqrt(mean_square + static_cast<double>(eps));
    y.row(r) = (x.row(r).cast<double>() * scale)
                   .cwiseProduct(weight.transpose().cast<double>())
                   .cast<float>();
  }
  return y;
}

Matrix softmax_rows(const Eigen::Ref<const Matrix>& logits) {
  Matrix p(logits.rows(), logits.cols());
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (logits.cols() == 0)
      continue;
    const float max = logits.row(r).maxCoeff();
    if (max == -std::numeric_limits<float>::infinity()) {
      throw std::invalid_argument("softmax_rows: row " + std::to_string(r) + " is all -inf");
    }
    const Eigen::RowVectorXd e = (logits.row(r).cast<double>().array() - double{max}).exp();
    p.row(r) = (e / e.sum()).cast<float>();
  }
  return p;
}

Top2Confidence top2_confidence(std::span<const float> logits) {
  if (logits.empty())
    throw std::invalid_argument("top2_confidence: empty logits");
  std::size_t top1 = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[top1])
      top1 = i;
  }
  const double max = logits[top1];
  if (max == -std::numeric_limits<double>::infinity()) {
    throw std::invalid_argument("top2_confidence: every logit is -inf");
  }
  double top2 = -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    sum += std::exp(double{logits[i]} - max);
    if (i != top1 && logits[i] > top2)
      top2 = logits[i];
  }
  // exp(max - max) = 1, so the top-1 probability is 1 / sum.
  const double p1 = 1.0 / sum;
  const double p2 = std::exp(top2 - max) / sum;
  return {.top1_index = static_cast<std::int64_t>(top1),
          .top1_prob = static_cast<float>(p1),
          .margin = static_cast<float>(p1 - p2)};
}

}  // namespace exitsim::engine
