#pragma once

#include <cstdint>
#include <optional>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/model_validation.hpp"

namespace exitsim {

// How many GPUs one replica spans. Tensor parallelism (TP) splits every layer across `tensor`
// GPUs of one node, Megatron-style.
struct ParallelSpec {
  int tensor = 1;

  int gpus() const { return tensor; }
  friend bool operator==(const ParallelSpec&, const ParallelSpec&) = default;
};

// One GPU's share of a model under tensor parallelism, as vLLM, SGLang and TensorRT-LLM shard it:
// - attention heads split `degree` ways (QKV column-parallel, O row-parallel);
// - K/V heads split when `degree` divides them, else replicated so that each GPU holds the one
//   K/V head its query heads read (degree a multiple of n_kv_heads, e.g. 8 GPUs for 8B's 8);
// - the MLP's hidden dimension split (gate/up column-parallel, down row-parallel); in a mixture
//   of experts every expert's, the same way (each GPU holds 1/degree of every expert; expert
//   parallelism, whole experts per GPU, is not modelled), and the router replicated;
// - the vocabulary split for the embedding and the LM head, padded up to a multiple of degree;
// - norms replicated.
struct TensorShard {
  int degree = 1;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;

  static TensorShard of(const ModelShape& model, int degree);
  // The weights one GPU holds, in bytes.
  std::int64_t weight_bytes(const ModelShape& model) const;
  // K and V of one token at one layer on one GPU.
  std::int64_t kv_bytes_per_token_per_layer(const ModelShape& model) const;
};

// The first reason `model` cannot be split as `parallel` says on `hardware`, naming the field
// under "parallel" ("tensor"), or nullopt: degree >= 1 and at most the GPUs of one node (TP's
// all-reduces run twice per layer and need the node's fast link), heads and the MLP's hidden
// dimension divisible by it, K/V heads divisible by it or dividing it.
std::optional<ShapeProblem> find_parallel_problem(const ModelShape& model,
                                                  const ParallelSpec& parallel,
                                                  const HardwareSpec& hardware);

}  // namespace exitsim
