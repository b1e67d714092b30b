#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <span>

// Reference implementations of the engine's numerics on the CPU. The GPU kernels are tested
// against these, so they favour accuracy (double accumulation) over speed.
namespace exitsim::engine {

// Activations are row-major: one row per token, so a token's vector is contiguous.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, per row. Throws std::invalid_argument when
// weight's size differs from x's column count or eps is negative.
Matrix rms_norm(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Eigen::VectorXf>& weight,
                float eps);

// Row-wise softmax, shifted by each row's maximum so that large logits do not overflow. Throws
// std::invalid_argument for a row whose every logit is -inf (no distribution exists).
Matrix softmax_rows(const Eigen::Ref<const Matrix>& logits);

// The exit confidence of CALM and FREE for one token's logits.
struct Top2Confidence {
  std::int64_t top1_index = 0;  // argmax; the lowest index among ties
  float top1_prob = 0;          // softmax probability of the argmax
  float margin = 0;             // top-1 minus top-2 probability; top1_prob for a 1-entry vocab
};

// Computed without materialising the softmax: p_i = exp(l_i - max) / sum_j exp(l_j - max).
// Throws std::invalid_argument for empty logits or all -inf.
Top2Confidence top2_confidence(std::span<const float> logits);

}  // namespace exitsim::engine
