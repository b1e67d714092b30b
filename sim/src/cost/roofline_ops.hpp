#pragma once

// The roofline model's op graphs and the linear work of each op (private to sim/src/cost).

#include "exitsim/core/model_shape.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim::roofline_ops {

// Params of a layer op for a layer carrying LoRA adapters of rank `rank` (0 for none).
OpParams layer_op(OpKind kind, const ModelShape& model, int rank);
OpParams head_op(OpKind kind, const ModelShape& model);

// One transformer layer. The K/V-only projection of state_copy is not in it: it reads hidden
// states copied at exits, depends on nothing in the layer, and runs after it on stream 0, so it
// adds its duration to the layer's path (priced apart, only for layers that have such tokens).
OpGraph build_layer_graph();
OpGraph build_head_graph();

}  // namespace exitsim::sim::roofline_ops
