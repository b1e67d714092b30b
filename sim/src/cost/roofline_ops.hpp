#pragma once

// The roofline model's op graphs and the linear work of each op (private to sim/src/cost).

#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim::roofline_ops {

// How much more than the mean of a mixture's T x top_k expert assignments the busiest GPU gets
// under expert parallelism, as (busiest / mean) = min(1 + coefficient / sqrt(T), cap): each
// GPU's load is a sum over tokens of hypergeometric counts (a token's top_k distinct experts,
// experts / p of them on the GPU), with mean T top_k / p and variance
// T top_k (1/p)(1 - 1/p)(E - top_k)/(E - 1); the busiest of p such loads is taken as the mean
// plus the expected maximum of p standard normals times the standard deviation, and at most what
// every token sending all it can to one GPU gives (cap = p min(top_k, E/p) / top_k). A normal
// approximation: within 10% of a Monte-Carlo count from 8 tokens up (ExpertParallel tests).
// Coefficient 0 without EP.
struct ExpertLoad {
  double coefficient = 0;
  double cap = 1;
};
ExpertLoad expert_load_imbalance(const ModelShape& model, const TensorShard& shard);
// E[max of n independent standard normals], by numerical integration.
double expected_max_of_normals(int n);

// What sets a layer's op params apart from another's: its LoRA adapters' rank (0 for none),
// and in a mixture of experts whether its MLP is a dense one (DeepSeek's first layers, Llama 4's
// interleaved ones). A windowed layer's params are those of its MLP's variant: what differs is
// the keys its attention sees, its batch features (WorkCounts::add_windowed_queries).
struct LayerVariant {
  int lora_rank = 0;
  bool dense_mlp = false;
  bool windowed = false;

  friend bool operator==(const LayerVariant&, const LayerVariant&) = default;
};

// Params of a layer op, one GPU's shard of it, for a layer of the variant given.
OpParams layer_op(OpKind kind, const ModelShape& model, const LayerVariant& variant,
                  const TensorShard& shard);
OpParams head_op(OpKind kind, const ModelShape& model, const TensorShard& shard);
// A collective of the tensor-parallel group (tp_all_reduce, logits_gather, probe_reduce): the
// bytes one GPU sends over the node's link in a ring (its time and latency: OpRates).
OpParams collective_op(OpKind kind, const ModelShape& model, const TensorShard& shard);

// One transformer layer; with `mixture_of_experts`, the router between the post-attention norm
// and the MLP; with `tensor_parallel`, its two all-reduces on stream 1. The K/V-only
// projection of state_copy is not in it: it reads hidden states copied at exits, depends on
// nothing in the layer, and runs after it on stream 0, so it adds its duration to the layer's
// path (priced apart, only for layers that have such tokens).
OpGraph build_layer_graph(bool tensor_parallel, bool mixture_of_experts);
OpGraph build_head_graph(bool tensor_parallel);
// The confidence probe of the tokens running at one exit point (the exit decision waits for it).
OpGraph build_probe_graph(bool tensor_parallel);

}  // namespace exitsim::sim::roofline_ops
