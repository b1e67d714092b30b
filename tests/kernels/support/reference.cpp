#include "kernels/support/reference.hpp"

#include <cmath>

namespace exitsim::kernels::testing {
namespace {

std::size_t at(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

}  // namespace

void rotary_reference(std::vector<float>& x, std::int64_t rows, std::int64_t heads,
                      std::int64_t head_dim, std::int64_t row_stride,
                      std::span<const std::int32_t> positions, std::span<const float> inv_freq) {
  engine::rotate_rows(x.data(), rows, row_stride, heads, head_dim, inv_freq, positions);
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
  const std::int64_t width = dims.n_heads * dims.head_dim;
  std::vector<float> out(at(static_cast<std::int64_t>(rows.size()) * width));
  engine::attend_rows(q.data(), width, self_k.data(), self_v.data(),
                      dims.n_kv_heads * dims.head_dim, rows, kv, dims, out.data());
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
