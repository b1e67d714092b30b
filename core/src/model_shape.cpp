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

std::int64_t ModelShape::mlp_parameters() const {
  const std::int64_t mlp_matrices = mlp == MlpKind::gated ? 3 : 2;
  return mlp_matrices * d_model * ffn_dim;
}

std::int64_t ModelShape::router_parameters() const {
  return is_moe() ? d_model * experts : 0;
}

std::int64_t ModelShape::layer_parameters() const {
  const std::int64_t q = d_model * n_heads * head_dim;
  const std::int64_t kv = 2 * d_model * n_kv_heads * head_dim;
  const std::int64_t o = n_heads * head_dim * d_model;
  const std::int64_t mlps = is_moe() ? experts : 1;
  const std::int64_t norms = 2 * d_model;
  return q + kv + o + mlps * mlp_parameters() + router_parameters() + norms;
}

std::int64_t ModelShape::lora_parameters(int rank) const {
  // A rank-r adapter on a (in x out) linear adds r * (in + out) parameters.
  const std::int64_t r = rank;
  const std::int64_t attention = r * (d_model + n_heads * head_dim) +
                                 2 * r * (d_model + n_kv_heads * head_dim) +
                                 r * (n_heads * head_dim + d_model);
  const std::int64_t mlp_matrices = mlp == MlpKind::gated ? 3 : 2;
  return attention + mlp_matrices * r * (d_model + ffn_dim);
}

std::int64_t ModelShape::parameter_count() const {
  std::int64_t total = depth.unique_layers() * layer_parameters();
  for (int rank : depth.lora_rank)
    total += depth.block_layers * lora_parameters(rank);
  const std::int64_t embedding = vocab * d_model;
  total += tied_embeddings ? embedding : 2 * embedding;
  total += d_model;  // final norm
  return total;
}

std::int64_t ModelShape::active_parameters_per_token() const {
  if (!is_moe())
    return parameter_count();
  return parameter_count() -
         depth.unique_layers() * (experts - experts_per_token) * mlp_parameters();
}

std::int64_t ModelShape::weight_bytes() const {
  return parameter_count() * bytes_per_element(dtype);
}

std::int64_t ModelShape::kv_bytes_per_token_per_layer() const {
  return 2 * n_kv_heads * head_dim * bytes_per_element(dtype);
}

double expected_distinct_experts(std::int64_t experts, std::int64_t top_k, double tokens) {
  if (experts <= 0 || tokens <= 0)
    return 0;
  const double e = static_cast<double>(experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;
  return e * (1.0 - std::pow(miss, tokens));
}

}  // namespace exitsim
