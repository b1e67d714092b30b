#include "exitsim/core/model_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "exitsim/core/error.hpp"

namespace exitsim {
namespace {

std::optional<ShapeProblem> problem(std::string field, std::string message) {
  return ShapeProblem{std::move(field), std::move(message)};
}

// The weights a shape may have: every size derived from them (a shard's, device memory less
// weights less reserve) then stays far inside int64. 4 EiB is no real model.
constexpr std::int64_t k_max_weight_bytes = std::int64_t{1} << 62;

// Refuses a shape whose weights pass k_max_weight_bytes, naming the key of the largest part
// (experts or ffn_dim for the MLPs, n_heads for attention, vocab for the embeddings,
// depth.lora_rank for the adapters), with the parts as figures computed in double (which does
// not wrap).
std::optional<ShapeProblem> find_size_problem(const ModelShape& s) {
  const Checked bytes = s.checked_parameter_count(/*head_apart=*/true) * bytes_per_element(s.dtype);
  if (bytes.value() && *bytes.value() <= k_max_weight_bytes)
    return std::nullopt;
  const auto real = [](std::int64_t v) { return static_cast<double>(v); };
  const double layers = real(s.depth.unique_layers());
  // Per layer.
  const double attention =
      real(s.d_model) * real(s.head_dim) * (2 * real(s.n_heads) + 2 * real(s.n_kv_heads));
  const double mlps = (s.is_moe() ? real(s.experts) : 1.0) * (s.mlp == MlpKind::gated ? 3 : 2) *
                      real(s.d_model) * real(s.ffn_dim);
  const double embeddings = 2 * real(s.vocab) * real(s.d_model);
  double lora_ranks = 0;
  for (int rank : s.depth.lora_rank)
    lora_ranks += rank;
  const double lora = real(s.depth.block_layers) * lora_ranks *
                      (2 * (real(s.n_heads) * real(s.head_dim) + real(s.d_model)) +
                       2 * (real(s.n_kv_heads) * real(s.head_dim) + real(s.d_model)) +
                       (s.mlp == MlpKind::gated ? 3 : 2) * (real(s.d_model) + real(s.ffn_dim)));
  const double parts[] = {layers * mlps, layers * attention, embeddings, lora};
  const char* fields[] = {s.is_moe() ? "experts" : "ffn_dim", "n_heads", "vocab",
                          "depth.lora_rank"};
  const auto largest = std::max_element(std::begin(parts), std::end(parts)) - std::begin(parts);
  return problem(
      fields[largest],
      expected_found(
          "a model of at most 2^62 bytes of weights (4 EiB)",
          fmt::format(
              "about {:.3g} bytes: {} layers x ({:.3g} attention + {:.3g} MLP "
              "parameters) + {:.3g} LoRA + {:.3g} embedding and LM head parameters, at {} "
              "bytes ({})",
              (layers * (attention + mlps) + lora + embeddings) * real(bytes_per_element(s.dtype)),
              s.depth.unique_layers(), attention, mlps, lora, embeddings,
              bytes_per_element(s.dtype), to_string(s.dtype))));
}

// A per-layer list (dense_layers, windowed_layers) has one entry per layer of a plain stack.
std::optional<ShapeProblem> find_per_layer_problem(const ModelShape& s, std::size_t entries,
                                                   const char* what) {
  if (entries == 0)
    return std::nullopt;
  const DepthStructure& d = s.depth;
  if (d.recursions > 0 || d.coda_layers > 0) {
    return problem(
        d.recursions > 0 ? "depth.recursions" : "depth.coda",
        expected_found(fmt::format("a plain stack (no shared block, no coda): the "
                                   "config gives each of its {} layers {}",
                                   entries, what),
                       fmt::format("{}", d.recursions > 0 ? d.recursions : d.coda_layers)));
  }
  if (static_cast<std::size_t>(d.prelude_layers) != entries) {
    return problem(
        "depth.prelude",
        expected_found(fmt::format("{} layers (the config gives each layer {})", entries, what),
                       fmt::format("{}", d.prelude_layers)));
  }
  return std::nullopt;
}

// What Hugging Face configs add: shared experts and dense layers of a mixture, latent
// attention, attention windows, norms.
std::optional<ShapeProblem> find_config_shape_problem(const ModelShape& s) {
  // Shared experts and dense layers come with a config's mixture: taking its experts away
  // (model.experts: 0) leaves them nowhere.
  if (!s.is_moe() && (s.shared_experts != 0 || !s.dense_layers.empty())) {
    return problem("experts", expected_found("a mixture of experts (the config's shared experts "
                                             "and dense layers are a mixture's)",
                                             fmt::format("{}", s.experts)));
  }
  if (s.shared_experts < 0) {
    return problem("shared_experts",
                   expected_found("an integer >= 0", fmt::format("{}", s.shared_experts)));
  }
  const bool any_dense =
      std::find(s.dense_layers.begin(), s.dense_layers.end(), true) != s.dense_layers.end();
  if (any_dense && s.dense_ffn_dim <= 0) {
    return problem("dense_ffn_dim", expected_found("a positive width of the dense layers' MLP",
                                                   fmt::format("{}", s.dense_ffn_dim)));
  }
  if (auto p = find_per_layer_problem(s, s.dense_layers.size(), "a dense MLP or a mixture"))
    return p;
  if (s.window.none() != s.windowed_layers.empty()) {
    return problem("window",
                   expected_found("a window with the layers it applies to, or neither",
                                  fmt::format("a window of {} tokens over {} layers",
                                              s.window.tokens, s.windowed_layers.size())));
  }
  if (auto p = find_per_layer_problem(s, s.windowed_layers.size(), "its attention's span"))
    return p;
  const LatentAttention& a = s.latent;
  if (a.enabled()) {
    if (a.rope_head_dim < 0 || a.rope_head_dim >= s.head_dim || a.v_head_dim <= 0 ||
        a.q_lora_rank < 0) {
      return problem(
          "head_dim",
          expected_found("latent attention's rotary part inside head_dim, a positive "
                         "value width and a q_lora_rank >= 0",
                         fmt::format("head_dim {}, rotary {}, values {}, q_lora_rank {}",
                                     s.head_dim, a.rope_head_dim, a.v_head_dim, a.q_lora_rank)));
    }
    if (s.n_kv_heads != s.n_heads) {
      return problem("n_kv_heads",
                     expected_found(fmt::format("n_heads ({}): latent attention gives every head "
                                                "its own keys and values",
                                                s.n_heads),
                                    fmt::format("{}", s.n_kv_heads)));
    }
    if (s.depth.recursions > 0) {
      return problem("depth.recursions",
                     expected_found("0 (a shared block of latent-attention layers is not modelled)",
                                    fmt::format("{}", s.depth.recursions)));
    }
  }
  if (s.norms_per_layer < 1 || s.learned_positions < 0) {
    return problem("norms_per_layer",
                   expected_found("at least one norm a layer and no negative position count",
                                  fmt::format("{} norms, {} positions", s.norms_per_layer,
                                              s.learned_positions)));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ShapeProblem> find_shape_problem(const ModelShape& shape) {
  const std::pair<const char*, std::int64_t> dimensions[] = {
      {"d_model", shape.d_model},   {"n_heads", shape.n_heads}, {"n_kv_heads", shape.n_kv_heads},
      {"head_dim", shape.head_dim}, {"ffn_dim", shape.ffn_dim}, {"vocab", shape.vocab}};
  for (const auto& [name, value] : dimensions) {
    if (value <= 0)
      return problem(name, expected_found("a positive integer", fmt::format("{}", value)));
  }
  if (shape.n_heads % shape.n_kv_heads != 0) {
    return problem("n_kv_heads",
                   expected_found(fmt::format("a divisor of n_heads ({})", shape.n_heads),
                                  fmt::format("{}", shape.n_kv_heads)));
  }
  if (shape.experts < 0) {
    return problem("experts", expected_found("an integer >= 0 (0 = a dense MLP)",
                                             fmt::format("{}", shape.experts)));
  }
  if (shape.experts == 0 && shape.experts_per_token != 0) {
    return problem("experts_per_token", expected_found("0 for a dense MLP (experts is 0)",
                                                       fmt::format("{}", shape.experts_per_token)));
  }
  if (shape.experts > 0 &&
      (shape.experts_per_token < 1 || shape.experts_per_token > shape.experts)) {
    return problem("experts_per_token",
                   expected_found(fmt::format("an integer in [1, {}] (the experts)", shape.experts),
                                  fmt::format("{}", shape.experts_per_token)));
  }
  const DepthStructure& d = shape.depth;
  const std::pair<const char*, int> counts[] = {{"depth.prelude", d.prelude_layers},
                                                {"depth.block", d.block_layers},
                                                {"depth.recursions", d.recursions},
                                                {"depth.coda", d.coda_layers}};
  for (const auto& [name, value] : counts) {
    if (value < 0)
      return problem(name, expected_found("an integer >= 0", fmt::format("{}", value)));
  }
  if (d.recursions == 0 && d.block_layers > 0) {
    return problem("depth.block",
                   expected_found("0 when recursions is 0", fmt::format("{}", d.block_layers)));
  }
  if (d.recursions > 0 && d.block_layers == 0) {
    return problem(
        "depth.block",
        expected_found(fmt::format("at least 1 layer for {} recursions", d.recursions), "0"));
  }
  if (d.stacked_depth() < 1) {
    return problem("depth.prelude", expected_found("at least one layer before the coda",
                                                   "prelude + block x recursions = 0"));
  }
  if (!d.lora_rank.empty() && d.lora_rank.size() != static_cast<std::size_t>(d.recursions)) {
    return problem("depth.lora_rank",
                   expected_found(fmt::format("one rank per recursion ({})", d.recursions),
                                  fmt::format("{}", d.lora_rank.size())));
  }
  for (int rank : d.lora_rank) {
    if (rank < 0)
      return problem("depth.lora_rank", expected_found("ranks >= 0", fmt::format("{}", rank)));
    // Which experts an adapter would sit on is not defined; nothing models it.
    if (rank > 0 && shape.is_moe()) {
      return problem("depth.lora_rank",
                     expected_found("rank 0 on a mixture of experts (LoRA on experts is not "
                                    "modelled)",
                                    fmt::format("{}", rank)));
    }
  }
  int previous = 0;
  for (int point : d.exit_points) {
    if (point < 1 || point > d.stacked_depth()) {
      return problem("depth.exit_points",
                     expected_found(fmt::format("exit points in [1, {}]", d.stacked_depth()),
                                    fmt::format("{}", point)));
    }
    if (point <= previous) {
      return problem("depth.exit_points",
                     expected_found(fmt::format("exit points ascending past {}", previous),
                                    fmt::format("{}", point)));
    }
    previous = point;
  }
  if (auto p = find_config_shape_problem(shape))
    return p;
  return find_size_problem(shape);
}

}  // namespace exitsim
