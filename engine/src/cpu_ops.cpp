#include "exitsim/engine/cpu_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

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

std::int64_t argmax(std::span<const float> logits) {
  std::size_t top1 = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[top1])
      top1 = i;
  }
  return static_cast<std::int64_t>(top1);
}

Top2Confidence head_summary(std::span<const float> logits, bool probabilities) {
  if (probabilities)
    return top2_confidence(logits);
  constexpr float unknown = std::numeric_limits<float>::quiet_NaN();
  return {.top1_index = argmax(logits), .top1_prob = unknown, .margin = unknown};
}

Top2Confidence top2_confidence(std::span<const float> logits) {
  if (logits.empty())
    throw std::invalid_argument("top2_confidence: empty logits");
  const auto top1 = static_cast<std::size_t>(argmax(logits));
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

Matrix embed_rows(const Matrix& embedding, std::span<const std::int32_t> tokens) {
  Matrix x(static_cast<Eigen::Index>(tokens.size()), embedding.cols());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= embedding.rows())
      throw std::out_of_range("embed: token id out of the vocabulary");
    x.row(static_cast<Eigen::Index>(i)) = embedding.row(tokens[i]);
  }
  return x;
}

void rotate_rows(float* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                 std::int64_t head_dim, std::span<const float> inv_freq,
                 std::span<const std::int32_t> positions) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto position = static_cast<float>(positions[static_cast<std::size_t>(r)]);
    float* row = x + r * row_stride;
    for (std::int64_t j = 0; j < half; ++j) {
      const float angle = position * inv_freq[static_cast<std::size_t>(j)];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        float& a = row[h * head_dim + j];
        float& b = row[h * head_dim + j + half];
        const float x1 = a;
        const float x2 = b;
        a = x1 * c - x2 * s;
        b = x2 * c + x1 * s;
      }
    }
  }
}

void attend_rows(const float* q, std::int64_t q_stride, const float* self_k, const float* self_v,
                 std::int64_t self_stride, std::span<const AttentionQuery> rows, const KvCache& kv,
                 const AttentionDims& dims, float* out) {
  const std::int64_t heads = dims.n_heads;
  const std::int64_t head_dim = dims.head_dim;
  const std::int64_t group = heads / dims.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const auto n = static_cast<std::int64_t>(rows.size());
  std::fill(out, out + n * heads * head_dim, 0.0f);
#pragma omp parallel for schedule(static) if (n * heads > 1)
  for (std::int64_t task = 0; task < n * heads; ++task) {
    const std::int64_t r = task / heads;
    const std::int64_t h = task % heads;
    const AttentionQuery& row = rows[static_cast<std::size_t>(r)];
    const std::int64_t kv_offset = (h / group) * head_dim;
    const float* query = q + r * q_stride + h * head_dim;
    const std::int64_t cached = row.stream >= 0 ? kv.rows_up_to(row.stream, row.position) : 0;
    const std::int64_t count = cached + (row.probe ? 1 : 0);
    // Scores, softmax and the weighted sum in double: a few extra cycles per key buy logits
    // that match a float64 reference to ~1e-6 rather than ~1e-5.
    std::vector<double> weights(static_cast<std::size_t>(count));
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < count; ++j) {
      const float* key =
          j < cached ? kv.key(row.stream, j) + kv_offset : self_k + r * self_stride + kv_offset;
      double dot = 0;
      for (std::int64_t c = 0; c < head_dim; ++c)
        dot += double{query[c]} * double{key[c]};
      weights[static_cast<std::size_t>(j)] = dot * scale;
      max = std::max(max, weights[static_cast<std::size_t>(j)]);
    }
    double sum = 0;
    for (double& w : weights) {
      w = std::exp(w - max);
      sum += w;
    }
    Eigen::VectorXd acc = Eigen::VectorXd::Zero(head_dim);
    for (std::int64_t j = 0; j < count; ++j) {
      const float* value =
          j < cached ? kv.value(row.stream, j) + kv_offset : self_v + r * self_stride + kv_offset;
      acc.noalias() += weights[static_cast<std::size_t>(j)] *
                       Eigen::Map<const Eigen::VectorXf>(value, head_dim).cast<double>();
    }
    if (count > 0) {
      Eigen::Map<Eigen::VectorXf>(out + (r * heads + h) * head_dim, head_dim) =
          (acc / sum).cast<float>();
    }
  }
}

}  // namespace exitsim::engine
