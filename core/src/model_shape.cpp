#include "exitsim/core/model_shape.hpp"

#include <algorithm>
#include <cmath>

namespace exitsim {

DepthStructure DepthStructure::plain(int layers) {
  DepthStructure d;
  d.prelude_layers = layers;
  return d;
}

DepthStructure DepthStructure::middle_cycle(int layers, int recursions) {
  DepthStructure d;
  d.prelude_layers = 1;
  d.coda_layers = 1;
  d.recursions = recursions;
  d.block_layers = (layers - 2) / recursions;
  return d;
}

std::vector<int> DepthStructure::effective_exit_points() const {
  if (!exit_points.empty())
    return exit_points;
  std::vector<int> points;
  if (is_recursive()) {
    for (int r = 1; r <= recursions; ++r)
      points.push_back(prelude_layers + block_layers * r);
  } else {
    points.push_back(stacked_depth());
  }
  return points;
}

int DepthStructure::recursion_of_depth(int depth) const {
  if (depth <= prelude_layers || block_layers == 0)
    return 0;
  return (depth - prelude_layers + block_layers - 1) / block_layers;
}

std::int64_t AttentionWindow::keys_at(std::int64_t position) const {
  if (none())
    return position + 1;
  return kind == WindowKind::sliding ? std::min(position + 1, tokens) : position % tokens + 1;
}

std::int64_t AttentionWindow::keys_before(std::int64_t n) const {
  const auto triangle = [](std::int64_t k) { return k * (k + 1) / 2; };
  if (none() || n <= 0)
    return n > 0 ? triangle(n) : 0;
  if (kind == WindowKind::sliding)
    return n <= tokens ? triangle(n) : triangle(tokens) + (n - tokens) * tokens;
  // Every whole chunk is a triangle, and so is the part of the last one.
  return n / tokens * triangle(tokens) + triangle(n % tokens);
}

std::int64_t AttentionWindow::kv_span(std::int64_t c, std::int64_t q) const {
  if (none())
    return c + q;
  if (kind == WindowKind::sliding)
    return c + q - std::max<std::int64_t>(c - tokens + 1, 0);
  return c % tokens + q;
}

bool ModelShape::layer_is_moe(int layer) const {
  const auto at = static_cast<std::size_t>(layer);
  return is_moe() && (at >= dense_layers.size() || !dense_layers[at]);
}

bool ModelShape::layer_is_windowed(int layer) const {
  const auto at = static_cast<std::size_t>(layer);
  return !window.none() && at < windowed_layers.size() && windowed_layers[at];
}

LayerShare LayerShare::whole(const ModelShape& m) {
  return {m.n_heads, m.n_kv_heads, m.ffn_dim, m.ffn_dim, m.dense_ffn_dim, m.experts};
}

namespace {

// The sizes below are computed through Checked: find_shape_problem bounds checked_parameter_count
// so that none of them wraps for a validated shape, and get() says so if one ever does.
Checked mlp_elements(const ModelShape& m, std::int64_t width) {
  const Checked mlp_matrices = m.mlp == MlpKind::gated ? 3 : 2;
  // GPT-2's biases: one per hidden unit going in, one per output.
  const Checked biases = m.biases ? Checked(width) + m.d_model : Checked(0);
  return mlp_matrices * m.d_model * width + biases;
}

Checked router_elements(const ModelShape& m) {
  return m.is_moe() ? Checked(m.d_model) * m.experts : Checked(0);
}

// Multi-head latent attention: the query path (a q_lora_rank down-projection, its norm and the
// up-projection, or one q_proj), the K/V down-projection to the latent and the rotary key with
// the latent's norm, the latent's up-projection to every head's key (no-rope part) and value, and
// the output. The down-projections are replicated under TP (vLLM's ReplicatedLinear).
Checked latent_attention_elements(const ModelShape& m, const LayerShare& share) {
  const LatentAttention& a = m.latent;
  const Checked heads = share.heads;
  const Checked query = a.q_lora_rank > 0 ? Checked(m.d_model) * a.q_lora_rank + a.q_lora_rank +
                                                Checked(a.q_lora_rank) * heads * m.head_dim
                                          : Checked(m.d_model) * heads * m.head_dim;
  const Checked kv_down = Checked(m.d_model) * a.cached_width() + a.kv_lora_rank;
  const Checked kv_up =
      Checked(a.kv_lora_rank) * heads * (Checked(m.head_dim) - a.rope_head_dim + a.v_head_dim);
  const Checked out = heads * a.v_head_dim * m.d_model;
  return query + kv_down + kv_up + out;
}

Checked attention_elements(const ModelShape& m, const LayerShare& share) {
  if (m.latent.enabled())
    return latent_attention_elements(m, share);
  const Checked q = Checked(share.heads) * m.head_dim;
  const Checked kv = Checked(share.kv_heads) * m.head_dim;
  const Checked weights = Checked(m.d_model) * q + Checked(2) * m.d_model * kv + q * m.d_model;
  const Checked biases = m.biases ? q + Checked(2) * kv + m.d_model : Checked(0);
  const Checked qk_norms = m.qk_norm ? Checked(2) * m.head_dim : Checked(0);
  return weights + biases + qk_norms;
}

Checked norm_elements(const ModelShape& m) {
  return Checked(m.biases ? 2 : 1) * m.d_model;
}

}  // namespace

Checked layer_elements(const ModelShape& m, int layer, const LayerShare& share) {
  Checked mlp = 0;
  if (m.layer_is_moe(layer)) {
    mlp = Checked(share.experts) * mlp_elements(m, share.ffn) +
          Checked(m.shared_experts) * mlp_elements(m, share.shared_ffn) + router_elements(m);
  } else {
    mlp = mlp_elements(m, m.is_moe() ? share.dense_ffn : share.ffn);
  }
  return attention_elements(m, share) + mlp + Checked(m.norms_per_layer) * norm_elements(m);
}

namespace {

Checked lora_elements(const ModelShape& m, int rank) {
  // A rank-r adapter on a (in x out) linear adds r * (in + out) parameters.
  const Checked r = rank;
  const Checked q = Checked(m.n_heads) * m.head_dim;
  const Checked kv = Checked(m.n_kv_heads) * m.head_dim;
  const Checked attention =
      r * (q + m.d_model) + Checked(2) * r * (kv + m.d_model) + r * (q + m.d_model);
  const Checked mlp_matrices = m.mlp == MlpKind::gated ? 3 : 2;
  return attention + mlp_matrices * r * (Checked(m.d_model) + m.ffn_dim);
}

}  // namespace

std::int64_t ModelShape::mlp_parameters() const {
  return mlp_elements(*this, ffn_dim).get("ModelShape::mlp_parameters");
}

std::int64_t ModelShape::router_parameters() const {
  return router_elements(*this).get("ModelShape::router_parameters");
}

std::int64_t ModelShape::layer_parameters(int layer) const {
  return layer_elements(*this, layer, LayerShare::whole(*this)).get("ModelShape::layer_parameters");
}

std::int64_t ModelShape::lora_parameters(int rank) const {
  return lora_elements(*this, rank).get("ModelShape::lora_parameters");
}

Checked ModelShape::checked_parameter_count(bool head_apart) const {
  const LayerShare whole = LayerShare::whole(*this);
  Checked total = 0;
  if (has_layer_kinds()) {
    for (int l = 0; l < depth.unique_layers(); ++l)
      total += layer_elements(*this, l, whole);
  } else {
    total = Checked(depth.unique_layers()) * layer_elements(*this, 0, whole);
  }
  for (int rank : depth.lora_rank)
    total += Checked(depth.block_layers) * lora_elements(*this, rank);
  const Checked embedding = Checked(vocab) * d_model;
  total += tied_embeddings && !head_apart ? embedding : Checked(2) * embedding;
  total += Checked(learned_positions) * d_model;
  total += norm_elements(*this);  // final norm
  return total;
}

std::int64_t ModelShape::parameter_count() const {
  return checked_parameter_count().get("ModelShape::parameter_count");
}

std::int64_t ModelShape::active_parameters_per_token() const {
  if (!is_moe())
    return parameter_count();
  Checked mixtures = 0;
  for (int l = 0; l < depth.unique_layers(); ++l)
    mixtures += layer_is_moe(l) ? 1 : 0;
  const Checked idle =
      mixtures * (Checked(experts) - experts_per_token) * mlp_elements(*this, ffn_dim);
  return (Checked(parameter_count()) - idle).get("ModelShape::active_parameters_per_token");
}

std::int64_t ModelShape::weight_bytes() const {
  return (checked_parameter_count() * bytes_per_element(dtype)).get("ModelShape::weight_bytes");
}

std::int64_t ModelShape::kv_bytes_per_token_per_layer() const {
  const Checked elements =
      latent.enabled() ? Checked(latent.cached_width()) : Checked(2) * n_kv_heads * head_dim;
  return (elements * bytes_per_element(dtype)).get("ModelShape::kv_bytes_per_token_per_layer");
}

double expected_distinct_experts(std::int64_t experts, std::int64_t top_k, double tokens) {
  if (experts <= 0 || tokens <= 0)
    return 0;
  const double e = static_cast<double>(experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;
  return e * (1.0 - std::pow(miss, tokens));
}

}  // namespace exitsim
