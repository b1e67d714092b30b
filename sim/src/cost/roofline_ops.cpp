#include "roofline_ops.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace exitsim::sim::roofline_ops {
namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

double expected_max_of_normals(int n) {
  if (n <= 1)
    return 0;
  // The density of the maximum is n phi(x) Phi(x)^(n-1); midpoint rule over [-10, 10].
  constexpr double k_step = 4e-3;
  double sum = 0;
  for (double x = -10 + k_step / 2; x < 10; x += k_step) {
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
    const double cdf = 0.5 * std::erfc(-x / std::numbers::sqrt2);
    sum += x * n * phi * std::pow(cdf, n - 1) * k_step;
  }
  return sum;
}

ExpertLoad expert_load_imbalance(const ModelShape& model, const TensorShard& shard) {
  if (!shard.expert_parallel)
    return {};
  const double p = shard.degree;
  const double experts = as_double(model.experts);
  const double k = as_double(model.experts_per_token);
  // sigma / mean for one token; the load of T tokens has sigma / mean of this / sqrt(T).
  const double spread = std::sqrt((p - 1) * (experts - k) / ((experts - 1) * k));
  return {expected_max_of_normals(shard.degree) * spread, p * std::min(k, experts / p) / k};
}

// Shape numbers the op params are built from, as doubles.
struct Dims {
  double d_model, q_width, kv_width, ffn, vocab, dtype_bytes, kv_bytes;
  bool gated;
  double experts, top_k;  // 0 and 0 for a dense MLP
  // The experts one GPU holds, and the expected experts per token it runs: top_k when it holds
  // a share of every expert, top_k / degree under EP.
  double local_experts, local_top_k;
  double imbalance, imbalance_cap;    // OpParams::expert_imbalance, _cap
  double shared_experts, shared_ffn;  // a mixture's shared experts and one GPU's share of each
  double dense_ffn;                   // one GPU's share of a dense layer's MLP in a mixture
  bool biases;                        // GPT-2's
  double o_width;                     // the output projection's input: heads x value width
  // Latent attention (all 0 without): this GPU's heads, the latent's rank, the rotary and the
  // no-rope parts of a query/key head, the value width, the query bottleneck's rank.
  double heads, latent, rope, nope, v_dim, q_rank;
};

// One GPU's dimensions: the shard's heads, K/V heads, MLP width (of each expert) and vocabulary;
// d_model whole.
Dims dims_of(const ModelShape& m, const TensorShard& shard) {
  const double degree = shard.expert_parallel ? shard.degree : 1;
  const ExpertLoad load = expert_load_imbalance(m, shard);
  const LatentAttention& a = m.latent;
  const double v_dim = a.enabled() ? as_double(a.v_head_dim) : as_double(m.head_dim);
  return {as_double(m.d_model),
          as_double(shard.heads * m.head_dim),
          as_double(shard.kv_heads * m.head_dim),
          as_double(shard.ffn),
          as_double(shard.vocab),
          as_double(bytes_per_element(m.dtype)),
          as_double(shard.kv_bytes_per_token_per_layer(m)),
          m.mlp == MlpKind::gated,
          as_double(m.experts),
          as_double(m.experts_per_token),
          as_double(shard.local_experts),
          as_double(m.experts_per_token) / degree,
          load.coefficient,
          load.cap,
          as_double(m.shared_experts),
          as_double(shard.shared_ffn),
          as_double(shard.dense_ffn),
          m.biases,
          as_double(shard.heads) * v_dim,
          as_double(shard.heads),
          as_double(a.kv_lora_rank),
          as_double(a.rope_head_dim),
          as_double(m.head_dim - a.rope_head_dim),
          as_double(a.v_head_dim),
          as_double(a.q_lora_rank)};
}

// A GEMM of T tokens by an (in x out) weight, with `lora` extra adapter weights folded into the
// same launch: weights read once, activations in and out once per token. With `bias` (GPT-2),
// an add per output and the bias read.
OpParams linear(double in, double out, double lora, double dtype_bytes, bool bias = false) {
  OpParams p;
  p.add(BatchFeature::tokens, 2 * (in * out + lora), (in + out) * dtype_bytes);
  p.fixed_bytes = (in * out + lora) * dtype_bytes;
  if (bias) {
    p.add(BatchFeature::tokens, out, 0);
    p.fixed_bytes += out * dtype_bytes;
  }
  return p;
}

// A mixture of experts' (in x out) linear, run for every token's top-k experts as one grouped
// GEMM (fused MoE kernels): FLOPs and activations of top_k experts per token, and the weights of
// the experts the batch is routed to, read once each. Which experts those are is not known, so
// they are the expected distinct experts of T tokens under uniform routing: the share
// 1 - (1 - top_k / experts)^T of all experts' weights (OpParams::routed_weight_bytes).
// Under EP a GPU holds experts / p of them whole: its expected share of the assignments is
// top_k / p per token and of the distinct experts read the same 1 - (1 - top_k / experts)^T.
OpParams expert_linear(const Dims& s, double in, double out) {
  OpParams p;
  p.add(BatchFeature::tokens, s.local_top_k * 2 * in * out,
        s.local_top_k * (in + out) * s.dtype_bytes);
  p.routed_weight_bytes = s.local_experts * in * out * s.dtype_bytes;
  p.expert_miss = 1 - s.top_k / s.experts;
  p.expert_imbalance = s.imbalance;
  p.expert_imbalance_cap = s.imbalance_cap;
  return p;
}

// The shared experts' (in x out) linear in the same grouped GEMM (vLLM's fused shared experts):
// every token runs all of them, their weights are read whatever the routing, and their work is
// the same on every GPU of an EP group (OpParams::balanced_flops, not the busiest GPU's share).
void add_shared_experts(OpParams& p, const Dims& s, double in, double out) {
  if (s.shared_experts <= 0)
    return;
  const double flops = s.shared_experts * 2 * in * out;
  const double bytes = s.shared_experts * (in + out) * s.dtype_bytes;
  p.add(BatchFeature::tokens, flops, bytes);
  p.balanced_flops += flops;
  p.balanced_bytes += bytes;
  p.fixed_bytes += s.shared_experts * in * out * s.dtype_bytes;
}

// Fused residual add + RMSNorm, as serving engines run it: reads the input and the residual,
// writes the normalised output and the new residual, reads the norm weight.
OpParams norm(const Dims& s) {
  OpParams p;
  p.add(BatchFeature::tokens, 4 * s.d_model, 4 * s.d_model * s.dtype_bytes);
  p.fixed_bytes = s.d_model * s.dtype_bytes;
  return p;
}

// Attention reads the K/V it attends over, writes the new tokens' K/V into the cache, and reads
// Q and writes O. FLOPs are QK^T and PV: 2 x 2 x heads x head_dim per (query, key) pair. Queries
// that reuse recursion 1's K/V write none.
OpParams attention(const Dims& s, BatchFeature queries, BatchFeature pairs, BatchFeature kv_read,
                   BatchFeature reusing) {
  OpParams p;
  p.add(pairs, 4 * s.q_width, 0);
  p.add(kv_read, 0, s.kv_bytes);
  p.add(queries, 0, s.kv_bytes + 2 * s.q_width * s.dtype_bytes);
  p.add(reusing, 0, -s.kv_bytes);
  p.launch_if = queries;
  return p;
}

// Weights of the K and V projections with their adapters, in elements.
double kv_weights(const Dims& s, double rank) {
  return 2 * (s.d_model * s.kv_width + rank * (s.d_model + s.kv_width));
}

// Fused QKV GEMM. Tokens reusing recursion 1's K/V compute and write only Q; when every token
// does, the K/V weights are not read either.
OpParams qkv_projection(const Dims& s, double rank) {
  OpParams p = linear(s.d_model, s.q_width + 2 * s.kv_width,
                      rank * (s.d_model + s.q_width) + 2 * rank * (s.d_model + s.kv_width),
                      s.dtype_bytes, s.biases);
  p.add(BatchFeature::kv_reuse_tokens, -2 * kv_weights(s, rank), -2 * s.kv_width * s.dtype_bytes);
  p.add(BatchFeature::kv_reuse_all, 0, -kv_weights(s, rank) * s.dtype_bytes);
  return p;
}

// state_copy: K and V of copied exit hidden states, a GEMM by the K/V weights plus the K/V cache
// write. The weights are read with the layer's QKV projection when other tokens run the layer
// (counted there, once per layer); only a layer that runs K/V-only tokens alone reads them here.
OpParams kv_projection(const Dims& s, double rank) {
  OpParams p;
  p.add(BatchFeature::kv_only_tokens, 2 * kv_weights(s, rank),
        (s.d_model + 2 * s.kv_width) * s.dtype_bytes + s.kv_bytes);
  p.add(BatchFeature::kv_only_alone, 0, kv_weights(s, rank) * s.dtype_bytes);
  p.launch_if = BatchFeature::kv_only_tokens;
  return p;
}

// Latent attention's projections, one GEMM chain per token: the query (through the q_lora_rank
// bottleneck, or one q_proj), the down-projection to the K/V latent and rotary key, and the
// latent's up-projection of every head (kv_b_proj: latent x heads x (no-rope key + value)).
// A decode token runs the last absorbed, as vLLM's MLA does: W_UK on its query and W_UV on its
// attention's output, which are the same FLOPs and weights as up-projecting one token's latent;
// a prefill token's latent is up-projected to its keys and values.
OpParams latent_projection(const Dims& s) {
  const double query =
      s.q_rank > 0 ? s.d_model * s.q_rank + s.q_rank * s.q_width : s.d_model * s.q_width;
  const double latent_width = s.latent + s.rope;
  const double weights = query + s.d_model * latent_width + s.latent * s.heads * (s.nope + s.v_dim);
  OpParams p;
  p.add(BatchFeature::tokens, 2 * weights, (s.d_model + s.q_width + latent_width) * s.dtype_bytes);
  p.fixed_bytes = weights * s.dtype_bytes;
  return p;
}

// state_copy on latent attention: the down-projection to the latent and rotary key only.
OpParams latent_kv_projection(const Dims& s) {
  const double weights = s.d_model * (s.latent + s.rope);
  OpParams p;
  p.add(BatchFeature::kv_only_tokens, 2 * weights, s.d_model * s.dtype_bytes + s.kv_bytes);
  p.add(BatchFeature::kv_only_alone, 0, weights * s.dtype_bytes);
  p.launch_if = BatchFeature::kv_only_tokens;
  return p;
}

// Decode on latent attention, absorbed (vLLM's MLA decode): every head's query, in the latent's
// space, attends over the cached latents as one multi-query head of latent + rope for keys and
// latent for values: 2 heads (latent + rope) + 2 heads latent FLOPs per (query, key) pair, and
// each key's latent read once for all heads.
OpParams latent_decode(const Dims& s) {
  OpParams p;
  p.add(BatchFeature::decode_kv, 2 * s.heads * (s.latent + s.rope) + 2 * s.heads * s.latent,
        s.kv_bytes);
  p.add(BatchFeature::decode_seqs, 0,
        s.kv_bytes + s.heads * (2 * s.latent + s.rope) * s.dtype_bytes);
  p.launch_if = BatchFeature::decode_seqs;
  return p;
}

// Prefill on latent attention, not absorbed (vLLM's MLA prefill): the cached context's latents
// are up-projected to keys and values (the new tokens' were, with the projections), and the
// queries attend as multi-head attention with head_dim-wide keys and v_head_dim values: 2 heads
// (head_dim + v_head_dim) FLOPs per pair; each key's latent is read and its keys and values
// read by the attention kernel.
OpParams latent_prefill(const Dims& s) {
  const double up_projection = 2 * s.latent * s.heads * (s.nope + s.v_dim);
  const double head_bytes = s.heads * (s.nope + s.rope + s.v_dim) * s.dtype_bytes;
  OpParams p;
  p.add(BatchFeature::prefill_pairs, 2 * s.heads * (s.nope + s.rope + s.v_dim), 0);
  p.add(BatchFeature::prefill_kv, up_projection, s.kv_bytes + head_bytes);
  p.add(BatchFeature::prefill_tokens, -up_projection, s.kv_bytes + head_bytes);
  p.launch_if = BatchFeature::prefill_tokens;
  return p;
}

// The gate and up projections (the up projection of a plain MLP) of a layer's variant.
OpParams gate_up(const Dims& s, const LayerVariant& variant, double rank) {
  const double matrices = s.gated ? 2 : 1;
  if (variant.dense_mlp)
    return linear(s.d_model, matrices * s.dense_ffn, 0, s.dtype_bytes, s.biases);
  // A mixture has no LoRA (find_shape_problem).
  if (s.experts > 0) {
    OpParams p = expert_linear(s, s.d_model, matrices * s.ffn);
    add_shared_experts(p, s, s.d_model, matrices * s.shared_ffn);
    return p;
  }
  return linear(s.d_model, matrices * s.ffn, matrices * rank * (s.d_model + s.ffn), s.dtype_bytes,
                s.biases);
}

// Element-wise: SiLU(gate) * up reads two values and writes one; GELU reads one. The FLOP counts
// are nominal (the op is memory-bound by a wide margin). A mixture runs it for each of a token's
// top_k experts and its shared experts.
OpParams activation(const Dims& s, const LayerVariant& variant) {
  const double flops = s.gated ? 5 : 8;
  const double values = s.gated ? 3 : 2;
  OpParams p;
  if (variant.dense_mlp) {
    p.add(BatchFeature::tokens, flops * s.dense_ffn, values * s.dense_ffn * s.dtype_bytes);
    return p;
  }
  const double per_token = s.experts > 0 ? s.local_top_k : 1;
  p.add(BatchFeature::tokens, per_token * flops * s.ffn,
        per_token * values * s.ffn * s.dtype_bytes);
  p.expert_imbalance = s.experts > 0 ? s.imbalance : 0;
  p.expert_imbalance_cap = s.imbalance_cap;
  if (s.experts > 0 && s.shared_experts > 0) {
    const double shared_flops = s.shared_experts * flops * s.shared_ffn;
    const double shared_bytes = s.shared_experts * values * s.shared_ffn * s.dtype_bytes;
    p.add(BatchFeature::tokens, shared_flops, shared_bytes);
    p.balanced_flops = shared_flops;
    p.balanced_bytes = shared_bytes;
  }
  return p;
}

OpParams down(const Dims& s, const LayerVariant& variant, double rank) {
  if (variant.dense_mlp)
    return linear(s.dense_ffn, s.d_model, 0, s.dtype_bytes, s.biases);
  if (s.experts > 0) {
    OpParams p = expert_linear(s, s.ffn, s.d_model);
    add_shared_experts(p, s, s.shared_ffn, s.d_model);
    return p;
  }
  return linear(s.ffn, s.d_model, rank * (s.ffn + s.d_model), s.dtype_bytes, s.biases);
}

}  // namespace

OpParams layer_op(OpKind kind, const ModelShape& model, const LayerVariant& variant,
                  const TensorShard& shard) {
  const Dims s = dims_of(model, shard);
  const double rank = variant.lora_rank;
  const bool latent = model.latent.enabled();
  switch (kind) {
    case OpKind::input_norm:
    case OpKind::post_attention_norm:
      return norm(s);
    case OpKind::qkv_projection:
      return latent ? latent_projection(s) : qkv_projection(s, rank);
    case OpKind::kv_projection:
      return latent ? latent_kv_projection(s) : kv_projection(s, rank);
    case OpKind::attention_prefill:
      if (latent)
        return latent_prefill(s);
      return attention(s, BatchFeature::prefill_tokens, BatchFeature::prefill_pairs,
                       BatchFeature::prefill_kv, BatchFeature::kv_reuse_prefill);
    case OpKind::attention_decode:
      if (latent)
        return latent_decode(s);
      return attention(s, BatchFeature::decode_seqs, BatchFeature::decode_kv,
                       BatchFeature::decode_kv, BatchFeature::kv_reuse_decode);
    case OpKind::output_projection:
      return linear(s.o_width, s.d_model, rank * (s.q_width + s.d_model), s.dtype_bytes, s.biases);
    case OpKind::moe_router: {
      // Replicated under TP (each GPU routes its tokens itself); the top-k selection is folded
      // into the same launch. A dense layer of a mixture has none.
      if (!variant.dense_mlp)
        return linear(s.d_model, s.experts, 0, s.dtype_bytes);
      OpParams none;
      none.launch_if = BatchFeature::never;
      return none;
    }
    case OpKind::mlp_gate_up:
      return gate_up(s, variant, rank);
    case OpKind::mlp_activation:
      return activation(s, variant);
    case OpKind::mlp_down:
      return down(s, variant, rank);
    case OpKind::final_norm:
    case OpKind::lm_head:
    case OpKind::sampling:
    case OpKind::tp_all_reduce:
    case OpKind::logits_gather:
    case OpKind::probe_norm:
    case OpKind::probe_head:
    case OpKind::probe_softmax:
    case OpKind::probe_reduce:
    case OpKind::host_op:
      break;
  }
  throw std::logic_error("layer_op: not a layer op");
}

OpParams head_op(OpKind kind, const ModelShape& model, const TensorShard& shard) {
  const Dims s = dims_of(model, shard);
  switch (kind) {
    case OpKind::final_norm:
      return norm(s);
    case OpKind::lm_head: {
      // Logits only for the tokens that emit: one row of d_model in, one row of vocab out each.
      OpParams p;
      p.add(BatchFeature::emitting, 2 * s.d_model * s.vocab, (s.d_model + s.vocab) * s.dtype_bytes);
      p.fixed_bytes = s.d_model * s.vocab * s.dtype_bytes;
      p.launch_if = BatchFeature::emitting;
      return p;
    }
    case OpKind::sampling: {
      // Softmax and a sampling scan over fp32 logits: two passes over the whole vocabulary per
      // emitting token, on the one GPU the logits were gathered to.
      const double vocab = as_double(model.vocab);
      OpParams p;
      p.add(BatchFeature::emitting, 5 * vocab, 2 * vocab * 4);
      p.launch_if = BatchFeature::emitting;
      return p;
    }
    case OpKind::probe_norm:
      return norm(s);
    case OpKind::probe_head: {
      // The LM head over every probed token (feature `tokens` of the probe's batch): its vocabulary
      // shard's logits, read back by the statistics.
      OpParams p;
      p.add(BatchFeature::tokens, 2 * s.d_model * s.vocab, (s.d_model + s.vocab) * s.dtype_bytes);
      p.fixed_bytes = s.d_model * s.vocab * s.dtype_bytes;
      return p;
    }
    case OpKind::probe_softmax: {
      // Max, sum of exponentials and the top two over the shard's logits: one pass.
      OpParams p;
      p.add(BatchFeature::tokens, 5 * s.vocab, s.vocab * s.dtype_bytes);
      return p;
    }
    default:
      break;
  }
  throw std::logic_error("head_op: not a head op");
}

}  // namespace exitsim::sim::roofline_ops
