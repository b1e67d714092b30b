#include "kernels/support/reference.hpp"

#include <cmath>
#include <limits>

namespace exitsim::kernels::testing {
namespace {

std::size_t at(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

}  // namespace

void rotary_reference(std::vector<float>& x, std::int64_t rows, std::int64_t heads,
                      std::int64_t head_dim, std::int64_t row_stride,
                      std::span<const std::int32_t> positions, double theta) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> inv_freq(at(half));
  for (std::int64_t j = 0; j < half; ++j) {
    inv_freq[at(j)] = static_cast<float>(
        std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto position = static_cast<float>(positions[at(r)]);
    for (std::int64_t j = 0; j < half; ++j) {
      const float angle = position * inv_freq[at(j)];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        float& a = x[at(r * row_stride + h * head_dim + j)];
        float& b = x[at(r * row_stride + h * head_dim + j + half)];
        const float x1 = a;
        const float x2 = b;
        a = x1 * c - x2 * s;
        b = x2 * c + x1 * s;
      }
    }
  }
}

std::vector<float> swiglu_reference(const std::vector<float>& gate, const std::vector<float>& up,
                                    std::int64_t rows, std::int64_t width, std::int64_t in_stride) {
  std::vector<float> out(at(rows * width));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < width; ++c) {
      const float g = gate[at(r * in_stride + c)];
      out[at(r * width + c)] = g / (1.0f + std::exp(-g)) * up[at(r * in_stride + c)];
    }
  }
  return out;
}

std::vector<float> attention_reference(const std::vector<float>& q,
                                       const std::vector<float>& self_k,
                                       const std::vector<float>& self_v,
                                       std::span<const QueryRow> rows, const engine::KvCache& kv,
                                       const AttentionDims& dims) {
  const std::int64_t heads = dims.n_heads;
  const std::int64_t head_dim = dims.head_dim;
  const std::int64_t group = heads / dims.n_kv_heads;
  const std::int64_t kv_width = dims.n_kv_heads * head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<float> out(at(static_cast<std::int64_t>(rows.size()) * heads * head_dim), 0.0f);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const QueryRow& row = rows[r];
    const auto ri = static_cast<std::int64_t>(r);
    const std::int64_t cached = row.stream >= 0 ? kv.rows_up_to(row.stream, row.position) : 0;
    const std::int64_t count = cached + (row.probe ? 1 : 0);
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t kv_offset = (h / group) * head_dim;
      const float* query = q.data() + ri * heads * head_dim + h * head_dim;
      std::vector<double> weights(at(count));
      double max = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < count; ++j) {
        const float* key = j < cached ? kv.key(row.stream, j) + kv_offset
                                      : self_k.data() + ri * kv_width + kv_offset;
        double dot = 0;
        for (std::int64_t c = 0; c < head_dim; ++c)
          dot += double{query[c]} * double{key[c]};
        weights[at(j)] = dot * scale;
        max = std::max(max, weights[at(j)]);
      }
      double sum = 0;
      for (double& w : weights) {
        w = std::exp(w - max);
        sum += w;
      }
      std::vector<double> acc(at(head_dim), 0.0);
      for (std::int64_t j = 0; j < count; ++j) {
        const float* value = j < cached ? kv.value(row.stream, j) + kv_offset
                                        : self_v.data() + ri * kv_width + kv_offset;
        for (std::int64_t c = 0; c < head_dim; ++c)
          acc[at(c)] += weights[at(j)] * double{value[c]};
      }
      if (count == 0)
        continue;
      for (std::int64_t c = 0; c < head_dim; ++c)
        out[at(ri * heads * head_dim + h * head_dim + c)] = static_cast<float>(acc[at(c)] / sum);
    }
  }
  return out;
}

std::vector<double> router_reference(const std::vector<float>& x, const std::vector<float>& weight,
                                     float bias, std::int64_t rows, std::int64_t dim) {
  std::vector<double> scores(at(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t c = 0; c < dim; ++c)
      dot += double{x[at(r * dim + c)]} * double{weight[at(c)]};
    scores[at(r)] = 1.0 / (1.0 + std::exp(-(dot + double{bias})));
  }
  return scores;
}

std::vector<double> gemm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                   std::int64_t m, std::int64_t n, std::int64_t k) {
  std::vector<double> y(at(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t c = 0; c < k; ++c)
        sum += double{x[at(i * k + c)]} * double{w[at(j * k + c)]};
      y[at(i * n + j)] = sum;
    }
  }
  return y;
}

}  // namespace exitsim::kernels::testing
