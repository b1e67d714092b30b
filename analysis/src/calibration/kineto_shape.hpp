#pragma once
// The model's shape from a mapped step's shapes: heads and head size from the attention, K/V
// heads from the q/k/v projections, the MLP (dense, or a mixture's experts) and the depth.

#include <cstddef>
#include <string>

#include "exitsim/core/model_shape.hpp"
#include "kineto_layers.hpp"

namespace exitsim::analysis::kineto {

// The shape, or why the step's shapes do not give it (`skip`: hidden_experts, uneven_routing).
struct ShapeReading {
  ModelShape shape;
  Skip skip = Skip::none;
  const Operator* culprit = nullptr;
  std::string problem;
};

// Reads the shape of `step` (the trace's step `index`, named in errors). Throws InputError
// naming the trace and the step where the shapes contradict each other (an output projection
// that is not the attention's width, q/k/v of no whole heads, recursion ranges that do not fit).
ShapeReading shape_of(const Trace& trace, const Step& step, std::size_t index);

}  // namespace exitsim::analysis::kineto
