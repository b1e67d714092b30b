// The model's shape from the shapes of one mapped step (docs/calibration.md, "How operators
// become the model's ops").
#include "kineto_shape.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "exitsim/core/error.hpp"

namespace exitsim::analysis::kineto {
namespace {

// The recursion (1-based) whose "exitsim.recursion.<r>" range holds time t; 0 outside all.
int recursion_at(std::span<const Range> ranges, double t) {
  for (const Range& r : ranges) {
    constexpr std::string_view prefix = "exitsim.recursion.";
    if (r.name.starts_with(prefix) && r.start_us <= t && t <= r.end_us) {
      const std::string number = r.name.substr(prefix.size());
      if (!number.empty() && number.size() < 6 &&
          std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::stoi(number);
    }
  }
  return 0;
}

// A fused experts kernel whose inputs carry the experts' first weights [experts, n, d_model]
// (vLLM's and SGLang's fused_experts) or [experts, d_model, n] (aten::_grouped_mm), n being gate
// and up where the kernel applies the activation itself or a split follows it, and the routing:
// [tokens, top_k] ids, or top_k rows per token.
bool read_fused_experts(const Layer& layer, std::int64_t d, ModelShape& shape) {
  const Operator& op = *layer.fused_experts;
  const bool grouped_gemm = op.name.find("grouped_mm") != std::string::npos;
  std::int64_t n = 0;
  std::int64_t top_k = 0;
  for (const Dims& x : op.input_dims) {
    if (x.size() == 3 && x[0] == shape.experts && n == 0)
      n = x[2] == d ? x[1] : x[1] == d ? x[2] : 0;
    if (x.size() == 2 && x[0] == layer.tokens && x[1] >= 1 && x[1] <= shape.experts && top_k == 0)
      top_k = x[1];
  }
  const Dims* rows_in = input(op, 0);
  if (grouped_gemm && rows_in != nullptr && rows_in->size() == 2 && layer.tokens > 0 &&
      (*rows_in)[0] % layer.tokens == 0)
    top_k = (*rows_in)[0] / layer.tokens;
  const bool gated = layer.split || !grouped_gemm;
  if (n == 0 || top_k < 1 || top_k > shape.experts || (gated && n % 2 != 0))
    return false;
  shape.ffn_dim = gated ? n / 2 : n;
  shape.experts_per_token = top_k;
  shape.mlp = gated ? MlpKind::gated : MlpKind::plain;
  return true;
}

// A mixture: the router's outputs are the experts; looped experts (Hugging Face's) give their
// width by their projections and top-k by the rows they ran: every token's k experts, so the
// experts' rows sum to k x tokens.
ShapeReading mixture_shape(const Layer& layer, std::int64_t d, ModelShape shape) {
  // Without a router before it (ups empty) a fused kernel is the only MLP operator there is.
  shape.experts = layer.ups.empty() ? 0 : layer.ups.front().out;
  if (layer.fused_experts != nullptr) {
    if (shape.experts > 0 && read_fused_experts(layer, d, shape))
      return {shape, Skip::none, nullptr, ""};
    return {shape, Skip::hidden_experts, layer.fused_experts, ""};
  }
  const std::size_t expert_ups = layer.ups.size() - 1;
  const bool separate = expert_ups == 2 * layer.downs.size();
  if (layer.downs.empty() || (!separate && expert_ups != layer.downs.size())) {
    return {shape, Skip::uneven_routing, layer.groups[gate_up].front(),
            fmt::format("a mixture of {} projections from d_model and {} back: its experts' "
                        "projections do not pair up",
                        layer.ups.size(), layer.downs.size())};
  }
  std::int64_t routed = 0;
  for (const Projection& p : layer.downs)
    routed += p.tokens;
  if (layer.tokens <= 0 || routed % layer.tokens != 0) {
    return {shape, Skip::uneven_routing, layer.groups[down].front(),
            fmt::format("a mixture whose experts ran {} rows for {} tokens (no whole top-k)",
                        routed, layer.tokens)};
  }
  shape.experts_per_token = routed / layer.tokens;
  const Projection& first = layer.ups[1];
  shape.mlp = separate || layer.split ? MlpKind::gated : MlpKind::plain;
  shape.ffn_dim = !separate && layer.split ? first.out / 2 : first.out;
  return {shape, Skip::none, nullptr, ""};
}

// A QK-norm (Qwen3's, Gemma 3's) between the q/k projections and the attention, where no norm of
// the hidden states runs: a norm kernel over one head's width (vLLM's [tokens x heads, head_dim]
// included), the rsqrt of a decomposed RMSNorm over per-head variances ([..., heads, 1]), or a
// framework's operator named for it (SGLang's apply_qk_norm).
bool has_qk_norm(const Layer& layer, std::int64_t d_model) {
  const std::int64_t head_dim = layer.attention.head_dim;
  for (const std::size_t group : {qkv_proj, rotary}) {
    for (const Operator* op : layer.groups[group]) {
      if (op->name.find("qk_norm") != std::string::npos)
        return true;
      const Dims* x = input(*op, 0);
      if (x == nullptr || x->size() < 2)
        continue;
      if (role_of(op->name) == Role::norm && x->back() == head_dim && head_dim != d_model)
        return true;
      if (op->name == "aten::rsqrt" && x->size() >= 4 && x->back() == 1)
        return true;
    }
  }
  return false;
}

}  // namespace

ShapeReading shape_of(const Trace& trace, const Step& step, std::size_t index) {
  const auto fail = [&](const std::string& what) {
    throw InputError(SourceLocation{trace.path, 0, 0, fmt::format("ProfilerStep[{}]", index)},
                     what);
  };
  ModelShape shape;
  const Dims& table = step.embedding->input_dims[0];
  shape.vocab = table[0];
  shape.d_model = table[1];
  const Layer& first = step.layers.front();
  const Attention& a = first.attention;
  shape.n_heads = a.heads;
  shape.head_dim = a.head_dim;
  std::int64_t q_width = 0;
  if (a.heads <= 0 || a.head_dim <= 0 || a.sequences <= 0 ||
      __builtin_mul_overflow(a.heads, a.head_dim, &q_width)) {
    fail(expected_found(
        "an attention over whole heads (sequences, heads, head size above 0)",
        fmt::format("{} sequences, {} heads of {}", a.sequences, a.heads, a.head_dim)));
  }
  if (first.o_proj.in != q_width) {
    fail(expected_found(
        fmt::format("an output projection from the attention's {} heads x {}", a.heads, a.head_dim),
        fmt::format("one of {} inputs", first.o_proj.in)));
  }
  std::int64_t qkv_out = 0;
  for (const Projection& p : first.qkv) {
    if (__builtin_add_overflow(qkv_out, p.out, &qkv_out))
      fail(expected_found("query, key and value projections of a plausible width", "more"));
  }
  const std::int64_t kv = qkv_out - first.o_proj.in;
  if (kv <= 0 || kv % (2 * a.head_dim) != 0) {
    fail(expected_found("query, key and value projections of whole heads",
                        fmt::format("{} outputs for {} query outputs of head size {}", qkv_out,
                                    first.o_proj.in, a.head_dim)));
  }
  shape.n_kv_heads = kv / (2 * a.head_dim);
  shape.qk_norm = has_qk_norm(first, shape.d_model);
  // Depth: prelude layers before the first recursion range, the shared block per recursion,
  // the coda after; a plain model is its layers as prelude.
  std::vector<int> recursion;
  for (const Layer& layer : step.layers)
    recursion.push_back(recursion_at(trace.ranges, layer.start_us));
  const auto first_r =
      std::find_if(recursion.begin(), recursion.end(), [](int r) { return r > 0; });
  if (first_r == recursion.end()) {
    shape.depth = DepthStructure::plain(static_cast<int>(step.layers.size()));
  } else {
    const auto last_r =
        std::find_if(recursion.rbegin(), recursion.rend(), [](int r) { return r > 0; });
    DepthStructure depth;
    depth.prelude_layers = static_cast<int>(first_r - recursion.begin());
    depth.coda_layers = static_cast<int>(last_r - recursion.rbegin());
    depth.recursions = *std::max_element(recursion.begin(), recursion.end());
    if (depth.recursions > static_cast<int>(step.layers.size())) {
      fail(expected_found("exitsim.recursion.<r> ranges numbered 1 to the recursions run",
                          fmt::format("recursion {} in a step of {} layers", depth.recursions,
                                      step.layers.size())));
    }
    depth.block_layers = static_cast<int>(std::count(recursion.begin(), recursion.end(), 1));
    if (depth.block_layers * depth.recursions + depth.prelude_layers + depth.coda_layers !=
        static_cast<int>(step.layers.size())) {
      fail(expected_found(
          "every exitsim.recursion.<r> range to hold the same number of layers",
          fmt::format("{} layers in {} recursions", step.layers.size(), depth.recursions)));
    }
    shape.depth = depth;
  }
  if (first.mixture())
    return mixture_shape(first, shape.d_model, shape);
  // Two projections (gate, up) or one fused one split in two: gated; one without a split: plain.
  shape.mlp = first.ups.size() == 2 || first.split ? MlpKind::gated : MlpKind::plain;
  shape.ffn_dim = first.ups.size() == 1 && first.split ? first.ups[0].out / 2 : first.ups[0].out;
  return {shape, Skip::none, nullptr, ""};
}

}  // namespace exitsim::analysis::kineto
