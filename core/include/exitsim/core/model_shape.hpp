#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/core/checked.hpp"
#include "exitsim/core/dtype.hpp"

namespace exitsim {

// How deep a token can go. A model is `prelude_layers` unique layers, then a block of
// `block_layers` (K) layers applied `recursions` (N_r) times with shared weights, then
// `coda_layers` unique layers, a final norm and the LM head. A plain L-layer model is
// prelude = L, recursions = 0.
//
// Depth is counted in executed layers before the coda. An exit point d means: the token ran the
// first d layers of the unrolled prelude + K x N_r stack, then the coda, final norm and LM head
// (which every exit point shares). The deepest exit point is always the full stack.
struct DepthStructure {
  int prelude_layers = 0;
  int block_layers = 0;
  int recursions = 0;
  // Per-recursion LoRA rank (relaxed recursion); empty = no LoRA, else one entry per recursion
  // with 0 meaning none for that recursion.
  std::vector<int> lora_rank;
  int coda_layers = 0;
  // Ascending, each in [1, stacked_depth()]. Empty = defaults: ends of recursions for a recursive
  // model, only the full depth for a plain one.
  std::vector<int> exit_points;

  static DepthStructure plain(int layers);
  // Middle-Cycle sharing (Mixture-of-Recursions): one unique first and last layer around a
  // shared block of (layers - 2) / recursions layers.
  static DepthStructure middle_cycle(int layers, int recursions);

  bool is_recursive() const { return recursions > 0; }
  // Layers of the unrolled prelude + block stack (the range exit points live in).
  int stacked_depth() const { return prelude_layers + block_layers * recursions; }
  // Layers a full-depth token executes.
  int full_depth() const { return stacked_depth() + coda_layers; }
  // Layers that own weights.
  int unique_layers() const { return prelude_layers + block_layers + coda_layers; }
  // exit_points, or the defaults when none were given.
  std::vector<int> effective_exit_points() const;
  // The recursion (1-based) a depth falls in, 0 when it is in the prelude.
  int recursion_of_depth(int depth) const;

  friend bool operator==(const DepthStructure&, const DepthStructure&) = default;
};

enum class MlpKind : std::uint8_t { gated, plain };  // gated: SwiGLU/GeGLU (3 matrices); plain: 2

struct ModelShape {
  std::string name;
  std::int64_t d_model = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn_dim = 0;
  std::int64_t vocab = 0;
  DType dtype = DType::bf16;
  MlpKind mlp = MlpKind::gated;
  bool tied_embeddings = false;
  // Longest sequence (prompt + output tokens) the model serves: its trained position range
  // (max_position_embeddings). 0 = unlimited.
  std::int64_t max_context = 0;
  // Mixture of experts (Mixtral): each layer's MLP is `experts` MLPs of width ffn_dim each, and a
  // router (a d_model x experts linear) sends every token to `experts_per_token` (top-k) of them.
  // experts = 0 is a dense MLP (experts_per_token 0 too).
  std::int64_t experts = 0;
  std::int64_t experts_per_token = 0;
  DepthStructure depth;

  bool is_moe() const { return experts > 0; }
  // Weights of one MLP (one expert of a mixture), in elements.
  std::int64_t mlp_parameters() const;
  // The router of one layer (d_model x experts); 0 for a dense model.
  std::int64_t router_parameters() const;
  // Weights of one transformer layer (attention + MLP, every expert and the router of a
  // mixture, + norms), in elements.
  std::int64_t layer_parameters() const;
  // LoRA adapters of one layer at the given rank (on every linear of the layer).
  std::int64_t lora_parameters(int rank) const;
  // All weights: unique layers, LoRA, embedding, LM head (once if tied), final norm.
  std::int64_t parameter_count() const;
  // parameter_count() computed without wrapping; with `head_apart`, a tied LM head counted apart
  // from the embedding (the copy a pipeline's last stage holds). find_shape_problem bounds it, so
  // that every size derived from a validated shape fits int64 (the others throw logic_error if
  // one ever does not).
  Checked checked_parameter_count(bool head_apart = false) const;
  // The weights one token's forward pass at full depth uses, shared weights once: all of
  // parameter_count() but the experts a mixture does not route it to (experts - experts_per_token
  // per unique layer). Equal to parameter_count() for a dense model.
  std::int64_t active_parameters_per_token() const;
  std::int64_t weight_bytes() const;
  // K and V of one token at one layer.
  std::int64_t kv_bytes_per_token_per_layer() const;

  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

// Expected number of distinct experts a batch of `tokens` tokens reads when each token is routed
// to `top_k` of `experts` experts, every set of top_k equally likely and tokens independent
// (uniform routing): an expert is missed by one token with probability 1 - top_k / experts, so
// by all of them with (1 - top_k / experts)^tokens, and
//   E[distinct] = experts x (1 - (1 - top_k / experts)^tokens).
// 0 for a dense model (experts 0).
double expected_distinct_experts(std::int64_t experts, std::int64_t top_k, double tokens);

}  // namespace exitsim
