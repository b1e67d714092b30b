#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exitsim/core/dtype.hpp"
#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/model_config.hpp"

// A model's tensors in fp32, laid out as PyTorch stores them (linears are [out, in]), and their
// names in a safetensors file (docs/engine_model_format.md). Unique layers use the Hugging Face
// Llama names, so a Llama checkpoint is a plain model of this format.
namespace exitsim::engine {

// A low-rank adapter on one linear: y += (x a^T) b^T. Empty matrices mean no adapter.
struct LinearLora {
  Matrix a;  // [rank, in]
  Matrix b;  // [out, rank]
};

// The seven linears of a layer in the order RecursionLora stores their adapters.
inline constexpr std::array<const char*, 7> k_layer_linears = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

struct LayerWeights {
  Eigen::VectorXf attn_norm;  // [d_model]
  Eigen::VectorXf mlp_norm;   // [d_model]
  Matrix wq;                  // [n_heads * head_dim, d_model]
  Matrix wk;                  // [n_kv_heads * head_dim, d_model]
  Matrix wv;                  // [n_kv_heads * head_dim, d_model]
  Matrix wo;                  // [d_model, n_heads * head_dim]
  Matrix w_gate;              // [ffn_dim, d_model]
  Matrix w_up;                // [ffn_dim, d_model]
  Matrix w_down;              // [d_model, ffn_dim]
};

// One recursion's adapters: per block layer, one per linear in k_layer_linears order. Every
// block layer has an entry; a recursion of rank 0 holds empty matrices.
struct RecursionLora {
  std::vector<std::array<LinearLora, 7>> layers;
};

// Mixture-of-Recursions router: score = weight . x + bias.
struct Router {
  Eigen::VectorXf weight;  // [d_model]
  float bias = 0;
};

struct ModelWeights {
  Matrix embedding;                  // [vocab, d_model]
  std::vector<LayerWeights> layers;  // unique layers: prelude, then the block, then the coda
  std::vector<RecursionLora> lora;   // one per recursion when the model has LoRA, else empty
  std::vector<Router> routers;       // one per recursion when the model has routers, else empty
  Eigen::VectorXf final_norm;        // [d_model]
  Matrix lm_head;                    // [vocab, d_model]; a copy of embedding when tied
};

// Every tensor name and shape the config calls for, in file order (embedding, layers, LoRA,
// routers, final norm, head). The head is left out when embeddings are tied.
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
};
std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config);

// Reads config.weights_path(): every tensor model_tensor_specs names, with exactly its shape,
// converted to fp32. A missing, misshapen, non-float or unexpected tensor is an InputError naming
// the file and the tensor; Hugging Face's stored rotary buffers (*.rotary_emb.inv_freq) are
// ignored, and so is lm_head.weight of a Llama whose config ties it to the embedding.
ModelWeights load_model_weights(const ModelConfig& config);

// Deterministic random weights for tests and benchmarks: the same seed gives bit-identical
// tensors on every platform. Each tensor draws from its own stream named after it, so adding a
// tensor never changes another. Linears and embedding have std 0.02 (o and down 0.02 /
// sqrt(2 x executed layers), as GPT-2 scales residual projections), norms are 1, LoRA A has std
// 0.02 and B std 0.02 (non-zero, so adapters change the outputs), routers std 0.1 with bias 0.
ModelWeights random_model_weights(const ModelConfig& config, std::uint64_t seed);

// Writes dir/model.safetensors in `file_dtype` (fp32, fp16 or bf16), then dir/exitsim.json
// (the config with weights = "model.safetensors"), each atomically and in that order, so the
// directory never has a config pointing at missing or partial weights. Creates `dir`. Throws
// std::invalid_argument when the weights do not have the config's shapes.
void save_model(const std::filesystem::path& dir, const ModelConfig& config,
                const ModelWeights& weights, DType file_dtype);

// Throws std::invalid_argument naming the first tensor whose shape differs from the config's.
void check_weights_shape(const ModelConfig& config, const ModelWeights& weights);

}  // namespace exitsim::engine
