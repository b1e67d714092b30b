// DeepSeek-V2 and V3 read from their Hugging Face configs (model.hf_config): multi-head latent
// attention and a mixture of routed and shared experts after dense layers. Every figure is
// worked out here from the config's numbers; the roofline's conventions for the few FLOPs that
// are not matrix products (4 d a norm, 5 a gated activation's unit, 5 vocab to sample) are
// docs/cost_model.md's.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exitsim/core/hf_config.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/hf_models.hpp"

namespace exitsim::sim {
namespace {

double flops_of(const std::vector<OpCost>& ops, OpKind kind, int layer) {
  for (const OpCost& op : ops) {
    if (op.kind == kind && op.layer == layer)
      return op.flops;
  }
  ADD_FAILURE() << "no op " << to_string(kind) << " at layer " << layer;
  return 0;
}

// deepseek-ai/DeepSeek-V2-Lite's config.json (../shared/models/hf/deepseek-v2-lite).
constexpr std::int64_t d = 2048, heads = 16, nope = 128, rope = 64, v = 128, latent = 512;
constexpr std::int64_t experts = 64, top_k = 6, shared = 2, expert_ffn = 1408;
constexpr std::int64_t dense_ffn = 10944, first_dense = 1, layers = 27, vocab = 102400;

ModelShape v2_lite(const std::string& path) {
  return read_hf_config(path);
}

// Weights per layer: q_proj d x heads (nope + rope) (no q_lora_rank), kv_a_proj_with_mqa
// d x (latent + rope) with the latent's norm, kv_b_proj latent x heads (nope + v), o_proj
// heads v x d, two norms; the first layer a dense SwiGLU MLP, the others 64 routed and 2 shared
// experts of 3 d x 1408 and the d x 64 router; untied embeddings and the final norm.
// transformers' DeepseekV2ForCausalLM counts the same 15,706,484,224.
TEST(HfLatentAttention, DeepSeekV2LiteWeightsAreItsLayersSum) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "deepseek-v2-lite");
  const ModelShape m = v2_lite(path);
  const std::int64_t attention = d * heads * (nope + rope) + d * (latent + rope) + latent +
                                 latent * heads * (nope + v) + heads * v * d;
  const std::int64_t norms = 2 * d;
  const std::int64_t expert = 3 * d * expert_ffn;
  const std::int64_t dense_layer = attention + norms + 3 * d * dense_ffn;
  const std::int64_t moe_layer = attention + norms + (experts + shared) * expert + d * experts;
  const std::int64_t total =
      first_dense * dense_layer + (layers - first_dense) * moe_layer + 2 * vocab * d + d;
  EXPECT_EQ(total, 15'706'484'224);
  EXPECT_EQ(m.parameter_count(), total);
  EXPECT_EQ(m.weight_bytes(), 2 * total);
  // A token skips 58 of the routed experts on each of the 26 mixture layers.
  EXPECT_EQ(m.active_parameters_per_token(),
            total - (layers - first_dense) * (experts - top_k) * expert);
}

// The cache holds one latent and one rotary key per token and layer, whatever the heads:
// (512 + 64) x 2 bytes, not 2 x 16 heads x 192 x 2 = 12,288. Each GPU of a TP group holds all of
// it (the latent is every head's).
TEST(HfLatentAttention, KvBytesAreTheLatentAndTheRotaryKey) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "deepseek-v2-lite");
  const ModelShape m = v2_lite(path);
  EXPECT_EQ(m.kv_bytes_per_token_per_layer(), (latent + rope) * 2);
  EXPECT_EQ(TensorShard::of(m, 2).kv_bytes_per_token_per_layer(m), (latent + rope) * 2);
}

// One decode token at context c, counted by the roofline. Decode absorbs kv_b_proj (vLLM's MLA):
// its FLOPs are the projection's (2 latent x heads (nope + v) a token, as W_UK on the query and
// W_UV on the output), and attention is one multi-query head over the cached latents: 2 heads
// (latent + rope) for QK^T and 2 heads latent for PV per key.
TEST(HfLatentAttention, DecodeFlopsPerTokenAbsorbTheLatentUpProjection) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "deepseek-v2-lite");
  const RooflineCostModel counter = RooflineCostModel::counting(v2_lite(path));
  const auto decode_flops = [&](std::int64_t c) {
    return counter.iteration_cost(std::vector<BatchEntry>{{1, c, layers, true}}).flops;
  };
  const double per_key = 2.0 * heads * (latent + rope) + 2.0 * heads * latent;
  const double projections =
      2.0 * (d * heads * (nope + rope) + d * (latent + rope) + latent * heads * (nope + v));
  const double output = 2.0 * heads * v * d;
  const double two_norms = 2 * 4.0 * d;
  const double dense_mlp = 2.0 * d * 2 * dense_ffn + 5.0 * dense_ffn + 2.0 * dense_ffn * d;
  // Router, then the 6 routed and 2 shared experts' gate/up, activation and down.
  const double moe_mlp =
      2.0 * d * experts +
      (top_k + shared) * (2.0 * d * 2 * expert_ffn + 5.0 * expert_ffn + 2.0 * expert_ffn * d);
  const double head = 4.0 * d + 2.0 * d * vocab + 5.0 * vocab;
  const std::int64_t c = 1000;
  const double expected = layers * (two_norms + projections + output + (c + 1) * per_key) +
                          first_dense * dense_mlp + (layers - first_dense) * moe_mlp + head;
  EXPECT_DOUBLE_EQ(decode_flops(c), expected);
  // Each further key costs every layer per_key FLOPs and one latent's bytes.
  EXPECT_DOUBLE_EQ(decode_flops(2 * c) - decode_flops(c), c * layers * per_key);
  const auto decode_bytes = [&](std::int64_t context) {
    return counter.iteration_cost(std::vector<BatchEntry>{{1, context, layers, true}}).bytes;
  };
  EXPECT_NEAR(decode_bytes(2 * c) - decode_bytes(c), c * layers * (latent + rope) * 2.0, 1e-3);
}

// Prefill does not absorb (vLLM's MLA prefill): its queries attend as 16 heads with 192-wide keys
// and 128-wide values, and the cached context's latents are up-projected first (the new tokens'
// were, with the projections): 100 tokens after 900.
TEST(HfLatentAttention, PrefillUpProjectsTheCachedContext) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "deepseek-v2-lite");
  const RooflineCostModel counter = RooflineCostModel::counting(v2_lite(path));
  const std::int64_t q = 100, c = 900;
  const std::vector<OpCost> ops =
      counter.op_breakdown(std::vector<BatchEntry>{{q, c, layers, true}});
  const double pairs = q * c + q * (q + 1) / 2.0;
  const double expected =
      pairs * 2.0 * heads * (nope + rope + v) + c * 2.0 * latent * heads * (nope + v);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_prefill, 5), expected);
  // No decode attention runs; the dense first layer has no router.
  EXPECT_EQ(flops_of(ops, OpKind::attention_decode, 5), 0);
  EXPECT_EQ(flops_of(ops, OpKind::moe_router, 0), 0);
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::moe_router, 1), 2.0 * q * d * experts);
}

// Under expert parallelism the step waits for the GPU with the most routed tokens, but every GPU
// runs the shared experts (split over the group as a dense MLP is) for every token: taking them
// out removes exactly their work, T x 2 shared x 2 d x 2 (1408 / 2) FLOPs of gate and up,
// unscaled by the routed experts' imbalance.
TEST(HfLatentAttention, SharedExpertsAreNotScaledByExpertParallelImbalance) {
  EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, "deepseek-v2-lite");
  const ModelShape with_shared = v2_lite(path);
  ModelShape routed_only = with_shared;
  routed_only.shared_experts = 0;
  const ParallelSpec ep{2, 1, 2};
  const std::vector<BatchEntry> batch(8, BatchEntry{1, 100, layers, true});
  const auto gate_up = [&](const ModelShape& m) {
    return flops_of(RooflineCostModel::counting(m, ep).op_breakdown(batch), OpKind::mlp_gate_up, 1);
  };
  EXPECT_DOUBLE_EQ(gate_up(with_shared) - gate_up(routed_only),
                   8.0 * shared * 2 * d * 2 * (expert_ffn / 2));
}

// deepseek-ai/DeepSeek-V3's config.json, the keys the shape reads (its quantization_config, FP8
// blocks, left out: a quantized checkpoint is refused; this is the model in bf16).
constexpr const char* k_deepseek_v3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"],
  "first_k_dense_replace": 3,
  "hidden_size": 7168,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "v_head_dim": 128,
  "vocab_size": 129280
})";

// DeepSeek-V3: queries through the 1536 bottleneck (q_a_proj, its norm, q_b_proj), 3 dense layers
// of 18432, then 256 routed and 1 shared expert of 2048 with the router: 671,026,404,352 weights
// (the model card's 671B; its multi-token-prediction layer is not loaded for serving) and
// 37,552,282,624 active (the card's 37B).
TEST(HfLatentAttention, DeepSeekV3WeightsAndActiveWeights) {
  const ModelShape m = parse_hf_config(k_deepseek_v3, "deepseek-v3/config.json");
  const std::int64_t hd = 7168, h = 128, qr = 1536, f = 2048, e = 256, l = 61, dense = 3;
  const std::int64_t attention = hd * qr + qr + qr * h * (nope + rope) + hd * (latent + rope) +
                                 latent + latent * h * (nope + v) + h * v * hd;
  const std::int64_t norms = 2 * hd;
  const std::int64_t expert = 3 * hd * f;
  const std::int64_t total = dense * (attention + norms + 3 * hd * 18432) +
                             (l - dense) * (attention + norms + (e + 1) * expert + hd * e) +
                             2 * 129280 * hd + hd;
  EXPECT_EQ(total, 671'026'404'352);
  EXPECT_EQ(m.parameter_count(), total);
  EXPECT_EQ(m.active_parameters_per_token(), total - (l - dense) * (e - 8) * expert);
  EXPECT_EQ(m.active_parameters_per_token(), 37'552'282'624);
  EXPECT_EQ(m.kv_bytes_per_token_per_layer(), (latent + rope) * 2);
}

// Under TP 8 each GPU runs the replicated down-projections (to the 1536 bottleneck, to the
// latent) in full and a sixteen-head share of the up-projections and of attention.
TEST(HfLatentAttention, DeepSeekV3ProjectionsShardByHeadsButNotTheirDownProjections) {
  const ModelShape m = parse_hf_config(k_deepseek_v3, "deepseek-v3/config.json");
  const RooflineCostModel counter = RooflineCostModel::counting(m, ParallelSpec{8, 1, 1});
  const std::int64_t c = 4095;
  const std::vector<OpCost> ops = counter.op_breakdown(std::vector<BatchEntry>{{1, c, 61, true}});
  const double hd = 7168, gpu_heads = 128 / 8, qr = 1536;
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::qkv_projection, 0),
                   2 * (hd * qr + qr * gpu_heads * (nope + rope) + hd * (latent + rope) +
                        latent * gpu_heads * (nope + v)));
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::attention_decode, 0),
                   (c + 1) * (2 * gpu_heads * (latent + rope) + 2 * gpu_heads * latent));
  EXPECT_DOUBLE_EQ(flops_of(ops, OpKind::output_projection, 0), 2 * gpu_heads * v * hd);
}

}  // namespace
}  // namespace exitsim::sim
