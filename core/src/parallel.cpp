#include "exitsim/core/parallel.hpp"

#include <fmt/format.h>

#include "exitsim/core/error.hpp"

namespace exitsim {

TensorShard TensorShard::of(const ModelShape& model, int degree) {
  const std::int64_t p = degree;
  TensorShard shard;
  shard.degree = degree;
  shard.heads = model.n_heads / p;
  shard.kv_heads = model.n_kv_heads >= p ? model.n_kv_heads / p : 1;
  shard.ffn = model.ffn_dim / p;
  shard.vocab = (model.vocab + p - 1) / p;
  return shard;
}

std::int64_t TensorShard::weight_bytes(const ModelShape& model) const {
  const std::int64_t d = model.d_model;
  const std::int64_t q = heads * model.head_dim;
  const std::int64_t kv = kv_heads * model.head_dim;
  const std::int64_t mlp_matrices = model.mlp == MlpKind::gated ? 3 : 2;
  // A mixture's experts are each split like the dense MLP; its router is replicated.
  const std::int64_t mlps = model.is_moe() ? model.experts : 1;
  const std::int64_t layer = d * q + 2 * d * kv + q * d + mlps * mlp_matrices * d * ffn +
                             model.router_parameters() + 2 * d;
  std::int64_t total = model.depth.unique_layers() * layer;
  for (const int rank : model.depth.lora_rank) {
    // Adapters shard with their linears: the sharded side of each is split, the other is not.
    const std::int64_t r = rank;
    const std::int64_t attention = r * (d + q) + 2 * r * (d + kv) + r * (q + d);
    total += model.depth.block_layers * (attention + mlp_matrices * r * (d + ffn));
  }
  const std::int64_t embedding = vocab * d;
  total += model.tied_embeddings ? embedding : 2 * embedding;
  total += d;  // final norm
  return total * bytes_per_element(model.dtype);
}

std::int64_t TensorShard::kv_bytes_per_token_per_layer(const ModelShape& model) const {
  return 2 * kv_heads * model.head_dim * bytes_per_element(model.dtype);
}

std::optional<ShapeProblem> find_parallel_problem(const ModelShape& model,
                                                  const ParallelSpec& parallel,
                                                  const HardwareSpec& hardware) {
  const auto problem = [](std::string field, std::string message) {
    return ShapeProblem{std::move(field), std::move(message)};
  };
  const int p = parallel.tensor;
  const std::string found = fmt::format("{}", p);
  if (p < 1)
    return problem("tensor", expected_found("a degree >= 1", found));
  if (p > hardware.interconnect.gpus_per_node) {
    return problem("tensor",
                   expected_found(fmt::format("at most the {} GPUs of one {} node (TP all-reduces "
                                              "twice per layer over the node's link)",
                                              hardware.interconnect.gpus_per_node, hardware.name),
                                  found));
  }
  if (model.n_heads % p != 0) {
    return problem("tensor", expected_found(fmt::format("a divisor of the {} attention heads of {}",
                                                        model.n_heads, model.name),
                                            found));
  }
  if (model.n_kv_heads % p != 0 && p % model.n_kv_heads != 0) {
    return problem("tensor",
                   expected_found(fmt::format("a divisor or a multiple of the {} K/V heads of {} "
                                              "(K/V heads are split, or replicated one per GPU)",
                                              model.n_kv_heads, model.name),
                                  found));
  }
  if (model.ffn_dim % p != 0) {
    return problem(
        "tensor",
        expected_found(fmt::format("a divisor of {}'s {} hidden units",
                                   model.experts > 0 ? "each expert" : "the MLP", model.ffn_dim),
                       found));
  }
  return std::nullopt;
}

}  // namespace exitsim
