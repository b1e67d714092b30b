#pragma once
// Reading one layer's attention out of the operator that starts it: its sequences, heads, head
// size, and queries and keys per sequence, from the operator's input shapes (and, for varlen
// kernels that flatten a batch's sequences, from cu_seqlens or the framework's step annotation).

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kineto_ops.hpp"

namespace exitsim::analysis::kineto {

struct Attention {
  std::int64_t sequences = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t queries = 0;  // per sequence
  std::int64_t keys = 0;     // per sequence
  // What the shapes did not say and was assumed (empty: nothing), for the console and notes.
  std::string assumed;
};

// What a step's annotation says about its batch (vLLM's execute_context_<n>_generation_<m>).
struct StepHints {
  std::optional<StepRequests> requests;
};

// Where a layer's attention starts: a fused attention operator (4-D SDPA-style operands, or 3-D
// varlen/paged operands [tokens, heads, head_dim]), or a batched matrix product of activations
// (queries by keys), 4-D [sequences, heads, tokens, head_dim] or 3-D [sequences x heads, tokens,
// head_dim], whose shapes agree with each other and with the projections `qkv` before it (a rotary
// table's product, [B, hd/2, 1] x [B, 1, T], does not). `tokens`: the layer's tokens.
// nullopt: not an attention; a problem: an attention kernel whose batch the shapes do not give.
struct AttentionReading {
  std::optional<Attention> attention;
  // Why an attention kernel could not be read, e.g. "a decode attention whose keys its shapes
  // do not give"; empty otherwise.
  std::string problem;
};
AttentionReading attention_core(const Operator& op, std::int64_t tokens,
                                std::span<const Projection> qkv, const StepHints& hints);

// The (query, key) pairs the simulator prices a layer's attention by (sim/cost/stack_work.hpp):
// per decode sequence its keys; per prefill sequence q*c + q(q+1)/2 causal pairs.
double attention_pairs(const Attention& a);

}  // namespace exitsim::analysis::kineto
