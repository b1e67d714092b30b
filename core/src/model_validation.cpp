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
  return find_size_problem(shape);
}

}  // namespace exitsim
