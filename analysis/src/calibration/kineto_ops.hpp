#pragma once
// What one top-level operator of a Kineto trace is, by its name and shapes: a projection (with
// its widths), or the role a framework's custom operator plays in a layer (kineto_op_names.cpp
// holds the tables; docs/calibration.md lists them).

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kineto_events.hpp"

namespace exitsim::analysis::kineto {

using Dims = std::vector<std::int64_t>;

// The elements of a shape; nullopt when they overflow (a hostile trace, not a tensor).
std::optional<std::int64_t> product(std::span<const std::int64_t> dims);
// The op's i-th input shape; nullptr past its inputs.
const Dims* input(const Operator& op, std::size_t i);
// The rows of a [..., width] activation: every dimension but the last; nullopt below 2-D.
std::optional<std::int64_t> rows(const Dims& x);

// A projection: an operator multiplying activations by a 2-D weight (aten::linear, matmul, mm,
// addmm, and the frameworks' GEMMs such as aiter::gemm_a16w16).
struct Projection {
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::int64_t tokens = 0;  // rows of activations
};
std::optional<Projection> projection(const Operator& op);

// The part of a layer a named operator is, where its name says.
enum class Role : std::uint8_t {
  other,
  view,           // views and reshapes: no work of their own worth a group
  norm,           // RMSNorm / LayerNorm kernels (not a QK-norm)
  kv_write,       // writes of new keys and values into a cache
  attention,      // a fused attention kernel (SDPA, flash, paged, varlen)
  gated_act,      // SiLU(gate) x up and its kin in one kernel: a gated MLP
  all_reduce,     // a tensor-parallel all-reduce
  gather,         // a tensor-parallel all-gather (the LM head's logits)
  fused_experts,  // a mixture of experts' experts in one kernel
};
Role role_of(std::string_view name);

// A split of one projection's output in two (chunk, split, a *_and_mul kernel): with a single
// gate/up projection, a gated MLP of half its width.
bool splits_in_two(std::string_view name);

// A framework's own operator (namespace::name, not aten::): where a step cannot be mapped, the
// first such operator is named as the likely cause.
bool is_framework_op(std::string_view name);

// A batched product of activations (matmul, bmm, baddbmm of 3-D or 4-D operands): a candidate for
// an attention's query x key product.
bool is_batched_product(const Operator& op);

// Step ranges a framework writes (record_function), besides torch.profiler's ProfilerStep#N.
enum class StepRange : std::uint8_t {
  none,
  vllm,     // execute_context_<n>(...)_generation_<m>(...): vLLM's per-step annotation
  sglang,   // step[<mode> bs=<n> toks=<t>]: SGLang's forward step
  capture,  // capture_<tokens>_<mode>: a CUDA-graph capture, not a run
};
StepRange step_range_kind(std::string_view name);

// The requests of a step annotation, prefill and decode sequences: vLLM's context_<n> and
// generation_<m>, SGLang's bs=<n> (decoding in DECODE mode); nullopt when the name does not say.
struct StepRequests {
  std::int64_t prefill = 0;
  std::int64_t decode = 0;
};
std::optional<StepRequests> step_requests(std::string_view name);

}  // namespace exitsim::analysis::kineto
