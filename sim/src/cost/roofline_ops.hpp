#pragma once

// The roofline model's op graphs and the linear work of each op (private to sim/src/cost).

#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim::roofline_ops {

// Params of a layer op, one GPU's shard of it, for a layer carrying LoRA adapters of rank `rank`
// (0 for none).
OpParams layer_op(OpKind kind, const ModelShape& model, int rank, const TensorShard& shard);
OpParams head_op(OpKind kind, const ModelShape& model, const TensorShard& shard);
// A collective of the tensor-parallel group (tp_all_reduce, logits_gather) as a ring over the
// node's link, each step taking `step_latency_ns` besides its bytes.
OpParams collective_op(OpKind kind, const ModelShape& model, const TensorShard& shard,
                       double step_latency_ns);

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
