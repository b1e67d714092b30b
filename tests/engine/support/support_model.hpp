#pragma once

// A small random model for engine tests and the reference forward pass they compare against:
// written here, independently of the engine's CPU backend (whole-sequence causal attention, no
// K/V cache, every operation in double), so the engine is checked against plain arithmetic. It
// applies the config's rope_scaling with its own formulation of the llama3 scaling.

#include <cstdint>
#include <vector>

#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/model_config.hpp"
#include "exitsim/engine/model_weights.hpp"

namespace exitsim::engine::test_support {

// d_model 32, 4 heads of 8 sharing 2 K/V heads, vocab 50; `depth` as given. Weights are
// random_model_weights scaled up so that predictions are peaked rather than near-uniform.
ModelConfig small_config(const DepthStructure& depth);
ModelWeights small_weights(const ModelConfig& config, std::uint64_t seed = 7);

// A prelude layer, a 2-layer block applied 3 times with LoRA at recursions 2 and 3, a coda
// layer: exit points at stack depths 3, 5 and 7.
DepthStructure small_recursive_depth();

struct ReferencePass {
  // Per executed layer: K and V (after rotary) of every position, rows of kv_width.
  std::vector<Matrix> keys, values;
  // Logits at every position after the full depth (coda, final norm, head).
  Matrix logits;
};

// `exit_depths` (empty: every position runs the whole stack) makes it state_copy's forward pass:
// position t's state stops changing after exit_depths[t] stack layers, the stack layers above it
// compute its K/V from that exit state, and the coda runs on it.
ReferencePass reference_forward(const ModelConfig& config, const ModelWeights& weights,
                                const std::vector<std::int32_t>& tokens,
                                const std::vector<int>& exit_depths = {});

}  // namespace exitsim::engine::test_support
