#pragma once
// From one step's top-level operators to its layers: the embedding, each layer's operators
// grouped as the engine's layer ops, the LM head and sampling; or, where the step cannot be read,
// why and at which operator.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kineto_attention.hpp"
#include "kineto_ops.hpp"

namespace exitsim::analysis::kineto {

// A layer's operator groups, in the engine's layer-op order (engine_ops::layer).
enum Group : std::size_t {
  attn_norm,
  qkv_proj,
  rotary,
  kv_write,
  attention,
  o_proj,
  mlp_norm,
  gate_up,
  mlp_act,
  down
};

// One layer's operators, grouped as the engine's layer ops.
struct Layer {
  std::array<std::vector<const Operator*>, 10> groups;
  std::vector<const Operator*> all_reduces;  // tensor-parallel all-reduces within the layer
  std::vector<Projection> qkv;
  Projection o_proj;
  // The MLP: the projections from d_model (gate and up, or a mixture's router and its experts'
  // first projections), those back to d_model (one down, or one per expert that ran), and a
  // mixture's fused experts kernel.
  std::vector<Projection> ups;
  std::vector<Projection> downs;
  const Operator* fused_experts = nullptr;
  bool routed = false;  // a top-k among the MLP's operators: a router's choice of experts
  bool split = false;   // a single up projection's output split in two (gated)
  Attention attention;
  std::int64_t tokens = 0;
  double start_us = 0;

  // A mixture of experts: a fused experts kernel, or a router whose top-k picks the experts.
  bool mixture() const { return fused_experts != nullptr || routed; }
};

// Why a step was skipped.
enum class Skip : std::uint8_t {
  none,
  no_shapes,             // none of its operators has input shapes
  no_embedding,          // no aten::embedding with a 2-D weight
  graph_capture,         // a CUDA-graph capture: its kernels are recorded, not run
  graph_replay,          // CUDA-graph replays whose decode batch no step annotation gives
  no_layer,              // no projection from d_model after the embedding
  unknown_attention,     // q/k/v projections and no attention this mapping reads
  unreadable_attention,  // an attention kernel whose batch its shapes do not give
  layer_cut_short,       // a layer without its MLP (the step ends inside it)
  layers_differ,         // layers shaped differently
  odd_mlp,               // an MLP neither dense (gate and up, or one up; one down) nor routed
  hidden_experts,        // a fused mixture of experts: the experts' width and top-k are in no shape
  uneven_routing,        // a mixture whose experts' rows are no whole top-k per token
};
constexpr std::size_t k_skip_kinds = 13;

// One step's operators, mapped; `skip` says why not where the step cannot be priced.
struct Step {
  const Operator* embedding = nullptr;
  std::vector<Layer> layers;
  std::vector<const Operator*> lm_head;  // empty: a base model (no LM head)
  std::int64_t lm_rows = 0;
  std::vector<const Operator*> sampling;
  std::vector<const Operator*> unmapped;
  Skip skip = Skip::none;
  std::string problem;                // the skip's own words where the mapping has them
  const Operator* culprit = nullptr;  // the first operator the mapping could not place
};

// Maps the operators after the step's `embedding`: layers from projections of d_model inputs
// (d_model and vocab from the embedding's weight), their attention, MLP and the LM head.
Step map_step(std::span<const Operator* const> operators, const Operator* embedding,
              const StepHints& hints);

}  // namespace exitsim::analysis::kineto
