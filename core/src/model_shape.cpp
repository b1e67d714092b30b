#include "exitsim/core/model_shape.hpp"

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

namespace {

// The sizes below are computed through Checked: find_shape_problem bounds checked_parameter_count
// so that none of them wraps for a validated shape, and get() says so if one ever does.
Checked mlp_elements(const ModelShape& m) {
  const Checked mlp_matrices = m.mlp == MlpKind::gated ? 3 : 2;
  return mlp_matrices * m.d_model * m.ffn_dim;
}

Checked router_elements(const ModelShape& m) {
  return m.is_moe() ? Checked(m.d_model) * m.experts : Checked(0);
}

Checked layer_elements(const ModelShape& m) {
  const Checked q = Checked(m.d_model) * m.n_heads * m.head_dim;
  const Checked kv = Checked(2) * m.d_model * m.n_kv_heads * m.head_dim;
  const Checked o = Checked(m.n_heads) * m.head_dim * m.d_model;
  const Checked mlps = m.is_moe() ? m.experts : 1;
  const Checked norms = Checked(2) * m.d_model;
  return q + kv + o + mlps * mlp_elements(m) + router_elements(m) + norms;
}

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
  return mlp_elements(*this).get("ModelShape::mlp_parameters");
}

std::int64_t ModelShape::router_parameters() const {
  return router_elements(*this).get("ModelShape::router_parameters");
}

std::int64_t ModelShape::layer_parameters() const {
  return layer_elements(*this).get("ModelShape::layer_parameters");
}

std::int64_t ModelShape::lora_parameters(int rank) const {
  return lora_elements(*this, rank).get("ModelShape::lora_parameters");
}

Checked ModelShape::checked_parameter_count(bool head_apart) const {
  Checked total = Checked(depth.unique_layers()) * layer_elements(*this);
  for (int rank : depth.lora_rank)
    total += Checked(depth.block_layers) * lora_elements(*this, rank);
  const Checked embedding = Checked(vocab) * d_model;
  total += tied_embeddings && !head_apart ? embedding : Checked(2) * embedding;
  total += d_model;  // final norm
  return total;
}

std::int64_t ModelShape::parameter_count() const {
  return checked_parameter_count().get("ModelShape::parameter_count");
}

std::int64_t ModelShape::active_parameters_per_token() const {
  if (!is_moe())
    return parameter_count();
  const Checked idle =
      Checked(depth.unique_layers()) * (Checked(experts) - experts_per_token) * mlp_elements(*this);
  return (Checked(parameter_count()) - idle).get("ModelShape::active_parameters_per_token");
}

std::int64_t ModelShape::weight_bytes() const {
  return (checked_parameter_count() * bytes_per_element(dtype)).get("ModelShape::weight_bytes");
}

std::int64_t ModelShape::kv_bytes_per_token_per_layer() const {
  return (Checked(2) * n_kv_heads * head_dim * bytes_per_element(dtype))
      .get("ModelShape::kv_bytes_per_token_per_layer");
}

double expected_distinct_experts(std::int64_t experts, std::int64_t top_k, double tokens) {
  if (experts <= 0 || tokens <= 0)
    return 0;
  const double e = static_cast<double>(experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;
  return e * (1.0 - std::pow(miss, tokens));
}

}  // namespace exitsim
