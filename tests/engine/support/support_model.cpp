#include "support_model.hpp"

#include <algorithm>
#include <cmath>

namespace exitsim::engine::test_support {

ModelConfig small_config(const DepthStructure& depth) {
  ModelConfig c;
  c.shape.name = "small-test";
  c.shape.d_model = 32;
  c.shape.n_heads = 4;
  c.shape.n_kv_heads = 2;
  c.shape.head_dim = 8;
  c.shape.ffn_dim = 64;
  c.shape.vocab = 50;
  c.shape.dtype = DType::fp32;
  c.shape.depth = depth;
  c.routers = true;
  c.max_positions = 512;
  return c;
}

DepthStructure small_recursive_depth() {
  DepthStructure d;
  d.prelude_layers = 1;
  d.block_layers = 2;
  d.recursions = 3;
  d.lora_rank = {0, 4, 4};
  d.coda_layers = 1;
  return d;
}

ModelWeights small_weights(const ModelConfig& config, std::uint64_t seed) {
  ModelWeights w = random_model_weights(config, seed);
  w.embedding *= 40.0f;
  for (LayerWeights& l : w.layers) {
    for (Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      *m *= 12.0f;
  }
  for (RecursionLora& r : w.lora) {
    for (auto& layer : r.layers) {
      for (LinearLora& a : layer) {
        a.a *= 10.0f;
        a.b *= 10.0f;
      }
    }
  }
  w.lm_head *= 40.0f;
  return w;
}

namespace {

using Md = Eigen::MatrixXd;

Md norm_rows(const Md& x, const Eigen::VectorXf& weight, float eps) {
  Md y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double scale =
        1.0 / std::sqrt(x.row(r).squaredNorm() / static_cast<double>(x.cols()) + double{eps});
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      y(r, c) = x(r, c) * scale * double{weight[c]};
  }
  return y;
}

Md linear(const Md& x, const Matrix& w, const LinearLora* lora) {
  Md y = x * w.cast<double>().transpose();
  if (lora != nullptr && lora->a.rows() > 0)
    y += (x * lora->a.cast<double>().transpose()) * lora->b.cast<double>().transpose();
  return y;
}

// Llama 3.1's frequency scaling, written from the number of turns a frequency makes within the
// original context rather than from its wavelength (as the engine's rope.cpp does): many turns
// (more than high_freq_factor) keep it, fewer than low_freq_factor divide it by the factor, and
// in between the kept share grows linearly with the turns.
double scaled_frequency(double freq, const RopeScaling& s) {
  if (s.kind != RopeScalingKind::llama3)
    return freq;
  const double turns = static_cast<double>(s.original_max_position_embeddings) * freq /
                       (2.0 * 3.14159265358979323846);
  const double kept =
      std::clamp((turns - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor), 0.0, 1.0);
  return freq * (kept + (1.0 - kept) / s.factor);
}

void rope(Md& m, std::int64_t heads, std::int64_t head_dim, double theta,
          const RopeScaling& scaling) {
  const std::int64_t half = head_dim / 2;
  for (Eigen::Index t = 0; t < m.rows(); ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j < half; ++j) {
        const double freq = scaled_frequency(
            std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)),
            scaling);
        const double angle = static_cast<double>(t) * freq;
        const double a = m(t, h * head_dim + j);
        const double b = m(t, h * head_dim + j + half);
        m(t, h * head_dim + j) = a * std::cos(angle) - b * std::sin(angle);
        m(t, h * head_dim + j + half) = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace

ReferencePass reference_forward(const ModelConfig& config, const ModelWeights& weights,
                                const std::vector<std::int32_t>& tokens,
                                const std::vector<int>& exit_depths) {
  const ModelShape& s = config.shape;
  const DepthStructure& d = s.depth;
  const auto n = static_cast<Eigen::Index>(tokens.size());
  Md x(n, s.d_model);
  for (Eigen::Index t = 0; t < n; ++t)
    x.row(t) = weights.embedding.row(tokens[static_cast<std::size_t>(t)]).cast<double>();
  ReferencePass out;
  const int executed = d.full_depth();
  for (int e = 0; e < executed; ++e) {
    int unique = e;
    int recursion = 0;
    if (e >= d.prelude_layers && e < d.stacked_depth()) {
      unique = d.prelude_layers + (e - d.prelude_layers) % d.block_layers;
      recursion = (e - d.prelude_layers) / d.block_layers + 1;
    } else if (e >= d.stacked_depth()) {
      unique = e - d.block_layers * (d.recursions - 1);
    }
    const LayerWeights& w = weights.layers[static_cast<std::size_t>(unique)];
    const std::array<LinearLora, 7>* lora = nullptr;
    if (recursion > 0 && !weights.lora.empty())
      lora = &weights.lora[static_cast<std::size_t>(recursion - 1)]
                  .layers[static_cast<std::size_t>(unique - d.prelude_layers)];
    const auto adapter = [&](std::size_t i) { return lora ? &(*lora)[i] : nullptr; };
    const Md h = norm_rows(x, w.attn_norm, config.rms_eps);
    Md q = linear(h, w.wq, adapter(0));
    Md k = linear(h, w.wk, adapter(1));
    const Md v = linear(h, w.wv, adapter(2));
    rope(q, s.n_heads, s.head_dim, config.rope_theta, config.rope_scaling);
    rope(k, s.n_kv_heads, s.head_dim, config.rope_theta, config.rope_scaling);
    out.keys.push_back(k.cast<float>());
    out.values.push_back(v.cast<float>());
    Md attention = Md::Zero(n, s.n_heads * s.head_dim);
    const std::int64_t group = s.n_heads / s.n_kv_heads;
    for (Eigen::Index t = 0; t < n; ++t) {
      for (std::int64_t head = 0; head < s.n_heads; ++head) {
        const std::int64_t kv_head = head / group;
        std::vector<double> score(static_cast<std::size_t>(t + 1));
        double max = -1e300;
        for (Eigen::Index u = 0; u <= t; ++u) {
          double dot = 0;
          for (std::int64_t c = 0; c < s.head_dim; ++c)
            dot += q(t, head * s.head_dim + c) * k(u, kv_head * s.head_dim + c);
          score[static_cast<std::size_t>(u)] = dot / std::sqrt(static_cast<double>(s.head_dim));
          max = std::max(max, score[static_cast<std::size_t>(u)]);
        }
        double total = 0;
        for (double& z : score) {
          z = std::exp(z - max);
          total += z;
        }
        for (Eigen::Index u = 0; u <= t; ++u) {
          for (std::int64_t c = 0; c < s.head_dim; ++c) {
            attention(t, head * s.head_dim + c) +=
                score[static_cast<std::size_t>(u)] / total * v(u, kv_head * s.head_dim + c);
          }
        }
      }
    }
    // An exited position's state stays its exit state: only the rows still running update.
    const Md before = x;
    x += linear(attention, w.wo, adapter(3));
    const Md h2 = norm_rows(x, w.mlp_norm, config.rms_eps);
    const Md gate = linear(h2, w.w_gate, adapter(4));
    const Md up = linear(h2, w.w_up, adapter(5));
    Md act(gate.rows(), gate.cols());
    for (Eigen::Index r = 0; r < gate.rows(); ++r) {
      for (Eigen::Index c = 0; c < gate.cols(); ++c) {
        const double g = gate(r, c);
        act(r, c) = g / (1.0 + std::exp(-g)) * up(r, c);
      }
    }
    x += linear(act, w.w_down, adapter(6));
    for (Eigen::Index t = 0; t < n && e < d.stacked_depth(); ++t) {
      if (!exit_depths.empty() && exit_depths[static_cast<std::size_t>(t)] <= e)
        x.row(t) = before.row(t);
    }
  }
  out.logits = (norm_rows(x, weights.final_norm, config.rms_eps) *
                weights.lm_head.cast<double>().transpose())
                   .cast<float>();
  return out;
}

}  // namespace exitsim::engine::test_support
