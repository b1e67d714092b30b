#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/engine/kv_cache.hpp"
#include "exitsim/engine/rope.hpp"

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
// The lowest index of the largest logit: greedy decoding's choice, without the softmax's
// exponentials (a vocabulary's worth per row). 0 for empty logits.
std::int64_t argmax(std::span<const float> logits);
// What a head reports for one row of logits: top2_confidence with `probabilities`, else the
// argmax alone with NaN probabilities.
Top2Confidence head_summary(std::span<const float> logits, bool probabilities);

// Rows of the embedding table for the tokens. Throws std::out_of_range for an id outside it.
Matrix embed_rows(const Matrix& embedding, std::span<const std::int32_t> tokens);

// Rotary position embedding in place on `rows` rows of `heads` heads, rows `row_stride` floats
// apart: value j of a head pairs with value j + head_dim / 2, at angle position * inv_freq[j]
// (inv_freq: rotary_inv_freq's table, rope.hpp), the product and the rotation in float.
void rotate_rows(float* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                 std::int64_t head_dim, std::span<const float> inv_freq,
                 std::span<const std::int32_t> positions);

// One query row of attention: it reads the K/V stream `stream` (-1: none) at positions <= its
// own, and a probe also attends to its own key and value (which are not in the cache).
struct AttentionQuery {
  std::int32_t position = 0;
  int stream = -1;
  bool probe = false;
};

struct AttentionDims {
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;  // divides n_heads (grouped-query attention)
  std::int64_t head_dim = 0;
};

// out[r] (n_heads x head_dim floats, rows contiguous) = softmax(q k^T / sqrt(head_dim)) v for
// each query row, head h reading K/V head h / (n_heads / n_kv_heads). q rows are `q_stride`
// floats apart, the probes' own K and V rows `self_stride` apart. Scores, softmax and the
// weighted sum in double; a row with no keys gets zeros.
void attend_rows(const float* q, std::int64_t q_stride, const float* self_k, const float* self_v,
                 std::int64_t self_stride, std::span<const AttentionQuery> rows, const KvCache& kv,
                 const AttentionDims& dims, float* out);

}  // namespace exitsim::engine
