#pragma once

#include <optional>
#include <string>

#include "exitsim/core/model_shape.hpp"

namespace exitsim {

// One inconsistency in a model shape. `field` is relative to the shape ("n_kv_heads",
// "depth.exit_points"), so each caller can prefix it with where the shape came from.
struct ShapeProblem {
  std::string field;
  std::string message;  // "expected ..., found ..."
};

// The first inconsistency of a shape, checked in field order, or nullopt when the shape is one
// the engine and the simulator can run: positive dimensions, n_heads a multiple of n_kv_heads,
// experts >= 0 with experts_per_token in [1, experts] (0 for a dense model), a shared block
// exactly when there are recursions, at least one layer, one LoRA rank per recursion (or none;
// only rank 0 on a mixture of experts), exit points strictly ascending within [1, stacked
// depth]; and what Hugging Face configs add: shared experts and dense layers only in a mixture,
// per-layer lists (dense layers, windowed layers) one entry per layer of a plain stack (refused
// at depth.prelude, depth.recursions or depth.coda otherwise), a window exactly with its layers,
// latent attention with its rotary part inside head_dim, n_kv_heads = n_heads and no shared
// block.
std::optional<ShapeProblem> find_shape_problem(const ModelShape& shape);

}  // namespace exitsim
