#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/model_validation.hpp"

namespace exitsim {

// Pipeline stages a replica may have (a 405B model's 126 layers rarely take more than 16).
inline constexpr int k_max_pipeline_stages = 64;

// How many GPUs one replica spans. Tensor parallelism (TP) splits every layer across `tensor`
// GPUs of one node, Megatron-style; pipeline parallelism (PP) splits the executed layers into
// `pipeline` consecutive stages, each on its own TP group. Expert parallelism (EP, `expert` =
// `tensor`) places a mixture's experts whole, spread over the TP group, instead of splitting each
// (vLLM's --enable-expert-parallel without data parallelism); 1 = off.
struct ParallelSpec {
  int tensor = 1;
  int pipeline = 1;
  int expert = 1;

  int gpus() const { return tensor * pipeline; }
  friend bool operator==(const ParallelSpec&, const ParallelSpec&) = default;
};

// The executed layers (stack then coda, as ModelShape's depth counts them) of one pipeline stage:
// [first, last), the embedding on the first stage, the final norm and LM head on the last.
struct PipelineStage {
  int first = 0;
  int last = 0;
  bool first_stage = true;
  bool last_stage = true;

  int layers() const { return last - first; }
  friend bool operator==(const PipelineStage&, const PipelineStage&) = default;
};

// vLLM's split (get_pp_indices): every stage gets layers / stages layers and the remainder goes
// one each to the stages just before the last, which also runs the final norm and the LM head.
// A recursive model is split over its unrolled layers: a stage holds the weights of the unique
// layers it executes, so a shared block's weights sit on every stage that runs one of its
// recursions. Requires 1 <= stages <= layers.
std::vector<PipelineStage> split_pipeline(int layers, int stages);

// Whether the hand-off after stage `stage` (to stage + 1) leaves the node: stages fill nodes in
// order, `parallel.tensor` GPUs each, `gpus_per_node` to a node.
bool hand_off_crosses_nodes(int stage, const ParallelSpec& parallel, int gpus_per_node);

// One GPU's share of a model under tensor parallelism, as vLLM, SGLang and TensorRT-LLM shard it:
// - attention heads split `degree` ways (QKV column-parallel, O row-parallel);
// - K/V heads split when `degree` divides them, else replicated so that each GPU holds the one
//   K/V head its query heads read (degree a multiple of n_kv_heads, e.g. 8 GPUs for 8B's 8);
// - the MLP's hidden dimension split (gate/up column-parallel, down row-parallel); in a mixture
//   of experts every expert's, the same way (each GPU holds 1/degree of every expert), or under
//   expert parallelism experts / degree whole experts per GPU; the router replicated; shared
//   experts and the dense layers among mixtures split as a dense MLP is;
// - latent attention's down-projections (to the Q bottleneck, to the K/V latent) replicated,
//   its up-projections and output split by heads, and its latent cached whole on every GPU;
// - the vocabulary split for the embedding and the LM head, padded up to a multiple of degree;
// - norms replicated.
struct TensorShard {
  int degree = 1;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  // K/V heads a decode kernel walks per sequence: kv_heads, or 1 for latent attention's latent
  // (one multi-query head for every query head).
  std::int64_t cache_heads = 0;
  std::int64_t ffn = 0;         // of the dense MLP, or of each expert this GPU holds
  std::int64_t shared_ffn = 0;  // of each shared expert of a mixture (split, EP or not)
  std::int64_t dense_ffn = 0;   // of a dense layer among a mixture's layers
  std::int64_t vocab = 0;
  std::int64_t local_experts = 0;  // experts this GPU holds (a share of each, or whole ones)
  bool expert_parallel = false;

  // `expert_parallel`: a mixture's experts are placed whole, experts / degree per GPU.
  static TensorShard of(const ModelShape& model, int degree, bool expert_parallel = false);
  static TensorShard of(const ModelShape& model, const ParallelSpec& parallel) {
    return of(model, parallel.tensor, parallel.expert > 1);
  }
  // The weights one GPU holds, in bytes: of the whole model, or of one pipeline stage.
  std::int64_t weight_bytes(const ModelShape& model) const;
  std::int64_t weight_bytes(const ModelShape& model, const PipelineStage& stage) const;
  // K and V of one token at one layer on one GPU.
  std::int64_t kv_bytes_per_token_per_layer(const ModelShape& model) const;
};

// The first reason `model` cannot be split as `parallel` says on `hardware`, naming the field
// under "parallel" ("tensor", "pipeline"), or nullopt: degrees >= 1; TP at most the GPUs of one
// node (its all-reduces run twice per layer and need the node's fast link), heads and the MLP's
// hidden dimension divisible by it, K/V heads divisible by it or dividing it; PP at most the
// executed layers; a replica spanning nodes needs TP to divide the node (no TP group straddles
// two nodes). EP needs a mixture, `expert` equal to `tensor` and dividing the experts (and then
// no longer the expert width divisible by TP).
std::optional<ShapeProblem> find_parallel_problem(const ModelShape& model,
                                                  const ParallelSpec& parallel,
                                                  const HardwareSpec& hardware);

// The first link `parallel` needs that `hardware` lacks, naming its key in full
// ("hardware.link_bandwidth_gbps": TP's collectives and the hand-offs between stages of one node;
// "hardware.node_link_bandwidth_gbps": hand-offs between nodes), or nullopt.
std::optional<ShapeProblem> find_link_problem(const ParallelSpec& parallel,
                                              const HardwareSpec& hardware);

}  // namespace exitsim
