// The operator names calibration knows: PyTorch's, Hugging Face's (PyTorch's), and the custom
// operators of vLLM (vllm::, _C::, _C_cache_ops::), SGLang (sgl_kernel::, sglang_profiler::),
// FlashAttention, FlashInfer and AMD's aiter. docs/calibration.md has the same table.
#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

#include "kineto_ops.hpp"

namespace exitsim::analysis::kineto {
namespace {

bool contains_any(std::string_view name, std::span<const std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view part) {
    return name.find(part) != std::string_view::npos;
  });
}

constexpr std::array<std::string_view, 18> k_views = {"aten::view",
                                                      "aten::reshape",
                                                      "aten::_reshape_alias",
                                                      "aten::as_strided",
                                                      "aten::slice",
                                                      "aten::select",
                                                      "aten::transpose",
                                                      "aten::t",
                                                      "aten::unsqueeze",
                                                      "aten::squeeze",
                                                      "aten::expand",
                                                      "aten::permute",
                                                      "aten::_unsafe_view",
                                                      "aten::detach",
                                                      "aten::contiguous",
                                                      "aten::clone",
                                                      "aten::repeat_interleave",
                                                      "aten::narrow"};

// Norm kernels by name; a QK-norm (Qwen3's, between the projections and the attention) is none.
constexpr std::array<std::string_view, 4> k_norms = {"rms_norm", "rmsnorm", "layer_norm",
                                                     "layernorm"};

// Cache writes: Hugging Face's DynamicCache concatenates, a static cache copies or indexes in;
// vLLM's reshape_and_cache(_flash) and unified_kv_cache_update, SGLang's set_kv_buffer.
constexpr std::array<std::string_view, 7> k_aten_kv_writes = {
    "aten::cat",       "aten::copy_",         "aten::index_copy_", "aten::index_put_",
    "aten::index_put", "aten::slice_scatter", "aten::scatter_"};
constexpr std::array<std::string_view, 6> k_kv_writes = {
    "reshape_and_cache", "_C_cache_ops::",   "unified_kv_cache_update",
    "set_kv_buffer",     "concat_and_cache", "store_kvcache"};

// Fused attention: PyTorch's SDPA and its kernels, FlashAttention (flash_attn::,
// _flash_attn_varlen_forward, vLLM's vllm_flash_attn), vLLM's unified_attention and
// paged_attention, FlashInfer's batch prefill/decode, aiter's and SGLang's mha kernels.
constexpr std::array<std::string_view, 13> k_attention = {
    "scaled_dot_product", "flash_attention", "efficient_attention", "flash_attn",
    "unified_attention",  "paged_attention", "varlen_fwd",          "mha_batch_prefill",
    "mha_varlen",         "mha_fwd",         "batch_prefill",       "batch_decode",
    "flashinfer::"};

constexpr std::array<std::string_view, 3> k_gated_acts = {"_and_mul", "mul_and_silu", "swiglu"};
constexpr std::array<std::string_view, 2> k_all_reduces = {"all_reduce", "allreduce"};
constexpr std::array<std::string_view, 2> k_gathers = {"all_gather", "allgather"};
// vllm::moe_forward, fused_moe, fused_experts, aiter::fmoe*, sgl_kernel's moe kernels, and
// PyTorch's grouped GEMM over experts (aten::_grouped_mm: transformers 5's default experts).
constexpr std::array<std::string_view, 3> k_experts = {"moe", "fused_experts", "grouped_mm"};

// Framework GEMMs whose inputs are activations [..., in] and a weight [out, in] (as
// aten::linear's), and those (like cutlass_scaled_mm(out, a, b)) whose activations and
// [in, out] weight come second and third.
constexpr std::array<std::string_view, 5> k_linear_gemms = {
    "aiter::gemm_a16w16", "vllm::rocm_unquantized_gemm", "aiter::gemm_a8w8",
    "aiter::gemm_a8w8_bpreshuffle", "aiter::tgemm"};
constexpr std::array<std::string_view, 1> k_out_first_gemms = {"_C::cutlass_scaled_mm"};

bool listed(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::optional<std::int64_t> product(std::span<const std::int64_t> dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  }
  return n;
}

const Dims* input(const Operator& op, std::size_t i) {
  return i < op.input_dims.size() ? &op.input_dims[i] : nullptr;
}

std::optional<std::int64_t> rows(const Dims& x) {
  return x.size() >= 2 ? product(std::span(x).first(x.size() - 1)) : std::nullopt;
}

std::optional<Projection> projection(const Operator& op) {
  const auto make = [](const Dims* x, std::int64_t in,
                       std::int64_t out) -> std::optional<Projection> {
    const std::optional<std::int64_t> n = x != nullptr ? rows(*x) : std::nullopt;
    if (!n || x->back() != in)
      return std::nullopt;
    return Projection{in, out, *n};
  };
  const Dims* a = input(op, 0);
  const Dims* b = input(op, 1);
  const Dims* c = input(op, 2);
  const bool linear = op.name == "aten::linear" || listed(op.name, k_linear_gemms);
  if (linear && b && b->size() == 2)
    return make(a, (*b)[1], (*b)[0]);  // weight [out, in]
  if ((op.name == "aten::matmul" || op.name == "aten::mm") && b && b->size() == 2)
    return make(a, (*b)[0], (*b)[1]);  // weight [in, out]
  if ((op.name == "aten::addmm" || listed(op.name, k_out_first_gemms)) && c && c->size() == 2)
    return make(b, (*c)[0], (*c)[1]);
  return std::nullopt;
}

Role role_of(std::string_view name) {
  if (listed(name, k_views))
    return Role::view;
  if (contains_any(name, k_attention))
    return Role::attention;
  if (listed(name, k_aten_kv_writes) || contains_any(name, k_kv_writes))
    return Role::kv_write;
  if (contains_any(name, k_all_reduces))
    return Role::all_reduce;
  if (contains_any(name, k_gathers))
    return Role::gather;
  if (contains_any(name, k_experts))
    return Role::fused_experts;
  if (contains_any(name, k_gated_acts))
    return Role::gated_act;
  if (contains_any(name, k_norms) && name.find("qk_norm") == std::string_view::npos)
    return Role::norm;
  return Role::other;
}

bool splits_in_two(std::string_view name) {
  static constexpr std::array<std::string_view, 6> k_splits = {
      "aten::chunk",  "aten::split", "aten::split_with_sizes",
      "aten::unbind", "aten::slice", "aten::narrow"};
  return listed(name, k_splits) || role_of(name) == Role::gated_act;
}

bool is_framework_op(std::string_view name) {
  return name.find("::") != std::string_view::npos && !name.starts_with("aten::");
}

bool is_batched_product(const Operator& op) {
  if (op.name != "aten::matmul" && op.name != "aten::bmm" && op.name != "aten::baddbmm")
    return false;
  const std::size_t first = op.name == "aten::baddbmm" ? 1 : 0;
  const Dims* q = input(op, first);
  const Dims* k = input(op, first + 1);
  return q != nullptr && k != nullptr && q->size() >= 3 && k->size() >= 3;
}

StepRange step_range_kind(std::string_view name) {
  if (name.starts_with("execute_") && name.find("context_") != std::string_view::npos &&
      name.find("generation_") != std::string_view::npos)
    return StepRange::vllm;
  if (name.starts_with("step["))
    return StepRange::sglang;
  if (name.starts_with("capture_"))
    return StepRange::capture;
  return StepRange::none;
}

// SGLang's step[<MODE> bs=<n> ...]: n sequences, decoding in DECODE mode, else prefilling.
std::optional<StepRequests> sglang_requests(std::string_view name) {
  const std::size_t at = name.find(" bs=");
  if (at == std::string_view::npos)
    return std::nullopt;
  std::int64_t n = 0;
  const char* first = name.data() + at + 4;
  const auto [end, error] = std::from_chars(first, name.data() + name.size(), n);
  if (error != std::errc{} || end == first || n < 1)
    return std::nullopt;
  if (name.substr(5).starts_with("DECODE"))
    return StepRequests{0, n};
  return StepRequests{n, 0};
}

std::optional<StepRequests> step_requests(std::string_view name) {
  if (step_range_kind(name) == StepRange::sglang)
    return sglang_requests(name);
  const auto count_after = [&](std::string_view key) -> std::optional<std::int64_t> {
    const std::size_t at = name.find(key);
    if (at == std::string_view::npos)
      return std::nullopt;
    const char* first = name.data() + at + key.size();
    std::int64_t n = 0;
    const auto [end, error] = std::from_chars(first, name.data() + name.size(), n);
    if (error != std::errc{} || end == first || end == name.data() + name.size() || *end != '(')
      return std::nullopt;
    return n;
  };
  const std::optional<std::int64_t> prefill = count_after("context_");
  const std::optional<std::int64_t> decode = count_after("generation_");
  if (!prefill || !decode || step_range_kind(name) != StepRange::vllm)
    return std::nullopt;
  return StepRequests{*prefill, *decode};
}

}  // namespace exitsim::analysis::kineto
