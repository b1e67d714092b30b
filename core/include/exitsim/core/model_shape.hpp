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

// How a local layer's queries see the context (Hugging Face configs: Gemma 2 and 3's sliding
// windows, Llama 4's chunked attention).
enum class WindowKind : std::uint8_t {
  sliding,  // the query at position p attends to positions (p - tokens, p]
  chunked,  // ... to the positions of its own chunk of `tokens` up to p: [p - p mod tokens, p]
};

// The attention span of a model's local layers; tokens 0: none, every layer sees the whole
// context.
struct AttentionWindow {
  WindowKind kind = WindowKind::sliding;
  std::int64_t tokens = 0;

  bool none() const { return tokens <= 0; }
  // Keys the query at 0-based position p attends to: min(p + 1, tokens) in a sliding window,
  // p mod tokens + 1 in a chunk (p + 1 with none).
  std::int64_t keys_at(std::int64_t position) const;
  // The sum of keys_at over positions [0, n): the (query, key) pairs of an n-token prefill.
  std::int64_t keys_before(std::int64_t n) const;
  // K/V tokens that queries at positions [c, c + q) read together: from the first key the first
  // of them attends to through c + q - 1.
  std::int64_t kv_span(std::int64_t c, std::int64_t q) const;

  friend bool operator==(const AttentionWindow&, const AttentionWindow&) = default;
};

// Multi-head latent attention (DeepSeek-V2 and V3): K and V of every head come from one latent
// of kv_lora_rank (the K/V cache holds it and a shared rotary key of rope_head_dim, not per-head
// K/V). Queries and keys are head_dim = qk_nope_head_dim + qk_rope_head_dim wide, values
// v_head_dim; queries come through a q_lora_rank bottleneck when it is not 0.
struct LatentAttention {
  std::int64_t kv_lora_rank = 0;  // 0: not latent attention
  std::int64_t q_lora_rank = 0;   // 0: a full q_proj (DeepSeek-V2-Lite)
  std::int64_t rope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
  // What the K/V cache holds of one token at one layer, in elements.
  std::int64_t cached_width() const { return kv_lora_rank + rope_head_dim; }

  friend bool operator==(const LatentAttention&, const LatentAttention&) = default;
};

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
  // Of a mixture: experts every token runs besides its routed ones, each ffn_dim wide
  // (DeepSeek's n_shared_experts, Llama 4's shared expert).
  std::int64_t shared_experts = 0;
  // Of a mixture: layers whose MLP is one dense MLP of dense_ffn_dim instead (DeepSeek's first
  // first_k_dense_replace layers, Llama 4's layers between interleaved mixtures), one entry per
  // layer; empty: every layer a mixture.
  std::vector<bool> dense_layers;
  std::int64_t dense_ffn_dim = 0;
  LatentAttention latent;
  // Layers whose attention sees only `window` of the context, one entry per layer; empty: none.
  AttentionWindow window;
  std::vector<bool> windowed_layers;
  // d_model-wide norms per layer (Gemma 2 and 3: 4, around attention and the MLP both).
  int norms_per_layer = 2;
  // Two head_dim-wide norms of Q and K per layer (Qwen3, Gemma 3).
  bool qk_norm = false;
  // GPT-2: every linear has a bias and every norm is a LayerNorm (a weight and a bias).
  bool biases = false;
  // Rows of a learned position embedding (GPT-2's n_positions); 0: none (rotary).
  std::int64_t learned_positions = 0;
  DepthStructure depth;

  bool is_moe() const { return experts > 0; }
  // Whether a (0-based, unique) layer's MLP is the mixture, or its attention the window.
  bool layer_is_moe(int layer) const;
  bool layer_is_windowed(int layer) const;
  // Whether layers differ from one another (in their MLP or their attention's span).
  bool has_layer_kinds() const { return !dense_layers.empty() || !windowed_layers.empty(); }
  // Weights of one MLP (one expert of a mixture), in elements.
  std::int64_t mlp_parameters() const;
  // The router of one layer (d_model x experts); 0 for a dense model.
  std::int64_t router_parameters() const;
  // Weights of one transformer layer (attention + MLP, every expert and the router of a
  // mixture, + norms), in elements: of layer 0, or of the (unique) layer given.
  std::int64_t layer_parameters() const { return layer_parameters(0); }
  std::int64_t layer_parameters(int layer) const;
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
  // K and V of one token at one layer (latent attention: its latent and rotary key).
  std::int64_t kv_bytes_per_token_per_layer() const;

  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

// One GPU's share of each dimension a layer splits under tensor parallelism (TensorShard), or
// the whole of each (`whole`): what layer_elements counts the weights of.
struct LayerShare {
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn = 0;         // of the dense MLP, or of each expert held
  std::int64_t shared_ffn = 0;  // of each shared expert
  std::int64_t dense_ffn = 0;   // of a dense layer among mixtures
  std::int64_t experts = 0;     // experts held (a share of each, or whole ones under EP)

  static LayerShare whole(const ModelShape& model);
};

// Weights of (unique) layer `layer`'s share, in elements: attention (latent attention's
// replicated down-projections in full), the MLP or the mixture (routed experts held, shared
// experts and router), norms and biases. LoRA adapters are not in it.
Checked layer_elements(const ModelShape& model, int layer, const LayerShare& share);

// Expected number of distinct experts a batch of `tokens` tokens reads when each token is routed
// to `top_k` of `experts` experts, every set of top_k equally likely and tokens independent
// (uniform routing): an expert is missed by one token with probability 1 - top_k / experts, so
// by all of them with (1 - top_k / experts)^tokens, and
//   E[distinct] = experts x (1 - (1 - top_k / experts)^tokens).
// 0 for a dense model (experts 0).
double expected_distinct_experts(std::int64_t experts, std::int64_t top_k, double tokens);

}  // namespace exitsim
