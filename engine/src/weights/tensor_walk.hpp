#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "exitsim/engine/model_weights.hpp"

// One walk over a model's tensors that loading, saving, random initialisation and shape checks
// all share, so the list of names and shapes exists once.
namespace exitsim::engine::detail {

// How random_model_weights initialises a tensor.
enum class Init : std::uint8_t { linear, residual, ones, lora_a, lora_b, router, zero };

// Sizes the per-layer, per-recursion containers of `w` for `config` (tensors stay empty).
void size_containers(const ModelConfig& config, ModelWeights& w);

// Calls visit(spec, target, init) for every tensor of `config` in file order, where target is a
// Matrix, Eigen::VectorXf or float (const when `Weights` is const). The containers of `w` must
// already have the config's sizes (size_containers).
template <class Weights, class Visit>
void walk_tensors(const ModelConfig& config, Weights& w, Visit&& visit) {
  const ModelShape& s = config.shape;
  const DepthStructure& depth = s.depth;
  const std::int64_t d = s.d_model;
  const std::int64_t q_width = s.n_heads * s.head_dim;
  const std::int64_t kv_width = s.n_kv_heads * s.head_dim;
  // [out, in] of each linear, in k_layer_linears order.
  const std::int64_t dims[7][2] = {{q_width, d},   {kv_width, d},  {kv_width, d}, {d, q_width},
                                   {s.ffn_dim, d}, {s.ffn_dim, d}, {d, s.ffn_dim}};
  const auto spec = [](std::string name, std::initializer_list<std::int64_t> shape) {
    return TensorSpec{std::move(name), std::vector<std::int64_t>(shape)};
  };

  visit(spec("model.embed_tokens.weight", {s.vocab, d}), w.embedding, Init::linear);
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    auto& layer = w.layers[i];
    const std::string p = fmt::format("model.layers.{}.", i);
    decltype(&layer.wq) linears[7] = {&layer.wq,     &layer.wk,   &layer.wv,    &layer.wo,
                                      &layer.w_gate, &layer.w_up, &layer.w_down};
    visit(spec(p + "input_layernorm.weight", {d}), layer.attn_norm, Init::ones);
    for (std::size_t l = 0; l < 7; ++l) {
      visit(spec(p + k_layer_linears[l] + ".weight", {dims[l][0], dims[l][1]}), *linears[l],
            l == 3 || l == 6 ? Init::residual : Init::linear);
      if (l == 3)
        visit(spec(p + "post_attention_layernorm.weight", {d}), layer.mlp_norm, Init::ones);
    }
  }
  for (std::size_t r = 0; r < w.lora.size(); ++r) {
    const std::int64_t rank = depth.lora_rank[r];
    if (rank == 0)
      continue;
    for (std::size_t j = 0; j < w.lora[r].layers.size(); ++j) {
      for (std::size_t l = 0; l < 7; ++l) {
        auto& adapter = w.lora[r].layers[j][l];
        const std::string p =
            fmt::format("model.recursions.{}.layers.{}.{}.", r, j, k_layer_linears[l]);
        visit(spec(p + "lora_A.weight", {rank, dims[l][1]}), adapter.a, Init::lora_a);
        visit(spec(p + "lora_B.weight", {dims[l][0], rank}), adapter.b, Init::lora_b);
      }
    }
  }
  for (std::size_t r = 0; r < w.routers.size(); ++r) {
    const std::string p = fmt::format("model.routers.{}.", r);
    visit(spec(p + "weight", {1, d}), w.routers[r].weight, Init::router);
    visit(spec(p + "bias", {1}), w.routers[r].bias, Init::zero);
  }
  visit(spec("model.norm.weight", {d}), w.final_norm, Init::ones);
  if (!s.tied_embeddings)
    visit(spec("lm_head.weight", {s.vocab, d}), w.lm_head, Init::linear);
}

// Element counts and storage of the three target kinds, so the walkers' callbacks stay generic.
inline std::int64_t spec_elements(const TensorSpec& spec) {
  std::int64_t count = 1;
  for (std::int64_t dim : spec.shape)
    count *= dim;
  return count;
}

template <class T>
void resize_target(T& target, const TensorSpec& spec) {
  if constexpr (std::is_same_v<T, Matrix>)
    target.resize(spec.shape[0], spec.shape[1]);
  else if constexpr (std::is_same_v<T, Eigen::VectorXf>)
    target.resize(spec.shape.back());
}

template <class T>
std::span<std::conditional_t<std::is_const_v<T>, const float, float>> target_values(T& target) {
  if constexpr (std::is_same_v<std::remove_const_t<T>, float>)
    return {&target, 1};
  else
    return {target.data(), static_cast<std::size_t>(target.size())};
}

template <class T>
bool target_matches(const T& target, const TensorSpec& spec) {
  if constexpr (std::is_same_v<T, Matrix>)
    return target.rows() == spec.shape[0] && target.cols() == spec.shape[1];
  else if constexpr (std::is_same_v<T, Eigen::VectorXf>)
    return target.size() == spec.shape.back();
  else
    return true;
}

}  // namespace exitsim::engine::detail
