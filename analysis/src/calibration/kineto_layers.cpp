// Reads a Llama-shaped model's structure out of its operators' order and shapes
// (docs/calibration.md, "From your own framework", has the rules and what they cannot map).
#include "kineto_layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::analysis::kineto {
namespace {

namespace ops = traces::engine_ops;
using Dims = std::vector<std::int64_t>;

// The elements of a shape; nullopt when they overflow (a hostile trace, not a tensor).
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

// A projection: an operator multiplying activations by a 2-D weight.
struct Projection {
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::int64_t tokens = 0;  // rows of activations
};

std::optional<Projection> projection(const Operator& op) {
  const auto make = [](const Dims& x, std::int64_t in,
                       std::int64_t out) -> std::optional<Projection> {
    const std::optional<std::int64_t> rows =
        x.size() >= 2 ? product(std::span(x).first(x.size() - 1)) : std::nullopt;
    if (!rows || x.back() != in)
      return std::nullopt;
    return Projection{in, out, *rows};
  };
  const Dims* a = input(op, 0);
  const Dims* b = input(op, 1);
  if (op.name == "aten::linear" && a && b && b->size() == 2)
    return make(*a, (*b)[1], (*b)[0]);  // weight [out, in]
  if ((op.name == "aten::matmul" || op.name == "aten::mm") && a && b && b->size() == 2)
    return make(*a, (*b)[0], (*b)[1]);  // weight [in, out]
  if (op.name == "aten::addmm" && input(op, 1) && input(op, 2) && input(op, 2)->size() == 2)
    return make(*input(op, 1), (*input(op, 2))[0], (*input(op, 2))[1]);
  return std::nullopt;
}

// The attention of one layer: queries per sequence, keys per sequence, sequences, heads.
struct Attention {
  std::int64_t sequences = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t queries = 0;
  std::int64_t keys = 0;
};

bool is_fused_attention(const std::string& name) {
  return name.find("scaled_dot_product") != std::string::npos ||
         name.find("flash_attention") != std::string::npos ||
         name.find("efficient_attention") != std::string::npos;
}

// Whether `a` reads the queries of the projections before it: whole heads of more than one
// element, as many as the query projection makes (separate q, k, v: the first one's outputs;
// one fused projection: its outputs less 2 x the K/V heads' width).
bool matches_projections(const Attention& a, std::span<const Projection> qkv) {
  std::int64_t width = 0;
  if (a.head_dim < 2 || a.heads < 1 || a.sequences < 1 || qkv.empty() ||
      __builtin_mul_overflow(a.heads, a.head_dim, &width))
    return false;
  if (qkv.front().out == width)
    return true;
  const std::int64_t kv = qkv.front().out - width;
  return qkv.size() == 1 && kv > 0 && kv % (2 * a.head_dim) == 0;
}

// Where a layer's attention starts: a fused attention operator, or a batched matrix product of
// activations (queries by keys), 4-D [sequences, heads, tokens, head_dim] or 3-D
// [sequences x heads, tokens, head_dim], whose shapes agree with each other and with the
// projections before it (a rotary table's product, [B, hd/2, 1] x [B, 1, T], does not).
std::optional<Attention> attention_core(const Operator& op, std::int64_t tokens,
                                        std::span<const Projection> qkv) {
  // baddbmm(input, batch1, batch2): the product's operands come second and third.
  const std::size_t first = op.name == "aten::baddbmm" ? 1 : 0;
  const Dims* q = input(op, first);
  const Dims* k = input(op, first + 1);
  if (q == nullptr || k == nullptr)
    return std::nullopt;
  std::optional<Attention> found;
  if (is_fused_attention(op.name)) {  // q [B, H, tq, hd], k [B, Hkv, tk, hd]
    if (q->size() == 4 && k->size() == 4 && (*q)[0] == (*k)[0] && (*q)[3] == (*k)[3])
      found = Attention{(*q)[0], (*q)[1], (*q)[3], (*q)[2], (*k)[2]};
  } else if (op.name == "aten::matmul" || op.name == "aten::bmm" || op.name == "aten::baddbmm") {
    if (q->size() == 4 && k->size() == 4 && (*q)[0] == (*k)[0] && (*q)[1] == (*k)[1] &&
        (*q)[3] == (*k)[2]) {  // q [B, H, tq, hd] x k^T [B, H, hd, tk]
      found = Attention{(*q)[0], (*q)[1], (*q)[3], (*q)[2], (*k)[3]};
    } else if (q->size() == 3 && k->size() == 3 && (*q)[0] == (*k)[0] && (*q)[2] == (*k)[1] &&
               (*q)[1] > 0 && tokens % (*q)[1] == 0) {  // [B x H, tq, hd] x [B x H, hd, tk]
      const std::int64_t sequences = tokens / (*q)[1];
      if (sequences > 0 && (*q)[0] % sequences == 0)
        found = Attention{sequences, (*q)[0] / sequences, (*q)[2], (*q)[1], (*k)[2]};
    }
  }
  if (found && matches_projections(*found, qkv))
    return found;
  return std::nullopt;
}

// Views and reshapes: no work of their own worth a group, they go with their neighbours.
bool is_view(const std::string& name) {
  static const std::array<std::string_view, 18> names = {"aten::view",
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
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Writes of new keys and values into a cache: concatenation (Hugging Face's DynamicCache),
// copies and index writes into a preallocated one, vLLM's reshape_and_cache.
bool is_kv_write(const std::string& name) {
  return name == "aten::cat" || name == "aten::copy_" || name == "aten::index_copy_" ||
         name == "aten::index_put_" || name == "aten::index_put" || name == "aten::slice_scatter" ||
         name == "aten::scatter_" || name.find("reshape_and_cache") != std::string::npos;
}

double total_us(std::span<const Operator* const> group) {
  double us = 0;
  for (const Operator* op : group)
    us += op->duration_us;
  return us;
}

// One layer's operators, grouped as the engine's layer ops (engine_ops::layer order).
struct Layer {
  std::array<std::vector<const Operator*>, 10> groups;
  std::vector<Projection> qkv;
  std::vector<Projection> gate_up;
  Projection o_proj;
  Projection down;
  Attention attention;
  std::int64_t tokens = 0;
  double start_us = 0;
};

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

// One step's operators, mapped.
struct Step {
  const Operator* embedding = nullptr;
  std::vector<Layer> layers;
  std::vector<const Operator*> lm_head;
  std::int64_t lm_rows = 0;
  std::vector<const Operator*> sampling;
  std::vector<const Operator*> unmapped;
  bool complete = false;
};

// Every layer of a step shaped as the first: the shape is read from the first, and a step whose
// layers differ (experts, a structure the mapping misread) is skipped rather than mis-priced.
bool same_layers(std::span<const Layer> layers) {
  const Layer& first = layers.front();
  const auto outs = [](const std::vector<Projection>& ps) {
    std::vector<std::int64_t> out;
    for (const Projection& p : ps)
      out.push_back(p.out);
    return out;
  };
  return std::all_of(layers.begin(), layers.end(), [&](const Layer& l) {
    return outs(l.qkv) == outs(first.qkv) && outs(l.gate_up) == outs(first.gate_up) &&
           l.o_proj.in == first.o_proj.in && l.down.in == first.down.in &&
           l.attention.heads == first.attention.heads &&
           l.attention.head_dim == first.attention.head_dim;
  });
}

class StepMapper {
 public:
  StepMapper(std::int64_t d_model, std::int64_t vocab) : d_(d_model), vocab_(vocab) {}

  // The operators after the step's embedding.
  Step map(std::span<const Operator* const> operators, const Operator* embedding) {
    Step step;
    step.embedding = embedding;
    std::vector<const Operator*> pending;
    Layer layer;
    State state = State::seek_layer;
    bool malformed = false;
    for (const Operator* op : operators) {
      const std::optional<Projection> p = projection(*op);
      switch (state) {
        case State::seek_layer:
          if (p && p->out == vocab_ && p->in == d_) {
            step.lm_head = std::move(pending);
            step.lm_head.push_back(op);
            step.lm_rows = p->tokens;
            pending.clear();
            state = State::sampling;
          } else if (p && p->in == d_) {
            layer = Layer{};
            layer.start_us = op->start_us;
            layer.tokens = p->tokens;
            split_norm(pending, step, layer);
            layer.groups[qkv_proj].push_back(op);
            layer.qkv.push_back(*p);
            state = State::qkv;
          } else {
            pending.push_back(op);
          }
          break;
        case State::qkv:
          if (p && p->in == d_) {
            layer.groups[rotary].insert(layer.groups[rotary].end(), pending.begin(), pending.end());
            pending.clear();
            layer.groups[qkv_proj].push_back(op);
            layer.qkv.push_back(*p);
          } else if (const auto core = attention_core(*op, layer.tokens, layer.qkv)) {
            split_rotary(pending, layer);
            layer.attention = *core;
            layer.groups[attention].push_back(op);
            state = State::attention;
          } else {
            pending.push_back(op);
          }
          break;
        case State::attention:
          if (p) {
            layer.groups[o_proj].push_back(op);
            layer.o_proj = *p;
            state = State::mlp_norm;
          } else {
            layer.groups[attention].push_back(op);
          }
          break;
        case State::mlp_norm:
          if (p && p->in == d_) {
            layer.groups[mlp_norm] = std::move(pending);
            pending.clear();
            layer.groups[gate_up].push_back(op);
            layer.gate_up.push_back(*p);
            state = State::gate_up;
          } else {
            pending.push_back(op);
          }
          break;
        case State::gate_up:
          if (p && p->in == d_) {
            layer.groups[mlp_act].insert(layer.groups[mlp_act].end(), pending.begin(),
                                         pending.end());
            pending.clear();
            layer.groups[gate_up].push_back(op);
            layer.gate_up.push_back(*p);
          } else if (p && p->out == d_) {
            layer.groups[mlp_act].insert(layer.groups[mlp_act].end(), pending.begin(),
                                         pending.end());
            pending.clear();
            layer.groups[down].push_back(op);
            layer.down = *p;
            // A router and experts' projections (a mixture of experts) or projections of unequal
            // widths are no dense MLP this mapping knows: the step is skipped, not mis-priced.
            malformed = malformed || layer.gate_up.size() > 2 ||
                        (layer.gate_up.size() == 2 && layer.gate_up[0].out != layer.gate_up[1].out);
            step.layers.push_back(std::move(layer));
            state = State::seek_layer;
          } else {
            pending.push_back(op);
          }
          break;
        case State::sampling:
          step.sampling.push_back(op);
          break;
      }
    }
    step.complete =
        state == State::sampling && !step.layers.empty() && !malformed && same_layers(step.layers);
    if (!step.complete)
      step.unmapped.insert(step.unmapped.end(), pending.begin(), pending.end());
    return step;
  }

 private:
  enum class State : std::uint8_t { seek_layer, qkv, attention, mlp_norm, gate_up, sampling };

  // Before the first layer, the step's set-up (positions, rotary tables, masks) precedes the
  // norm: the norm starts at the first operator on the hidden states ([..., d_model]).
  void split_norm(std::vector<const Operator*>& pending, Step& step, Layer& layer) const {
    auto first = pending.begin();
    if (step.layers.empty()) {
      first = std::find_if(pending.begin(), pending.end(), [&](const Operator* op) {
        const Dims* x = input(*op, 0);
        return !is_view(op->name) && x != nullptr && x->size() >= 2 && x->back() == d_;
      });
      step.unmapped.insert(step.unmapped.end(), pending.begin(), first);
    }
    layer.groups[attn_norm].assign(first, pending.end());
    pending.clear();
  }

  // Between the projections and the attention: rotary, then the K/V writes. Walking back from
  // the attention, views (and the grouped-query head expansion) join the attention, the run of
  // cache writes is the K/V write, the rest is rotary.
  static void split_rotary(std::vector<const Operator*>& pending, Layer& layer) {
    std::size_t end = pending.size();
    while (end > 0 && is_view(pending[end - 1]->name))
      --end;
    std::size_t begin = end;
    while (begin > 0 &&
           (is_kv_write(pending[begin - 1]->name) || is_view(pending[begin - 1]->name)))
      --begin;
    while (begin < end && !is_kv_write(pending[begin]->name))
      ++begin;  // views before the first write stay with the rotary
    auto& r = layer.groups[rotary];
    r.insert(r.end(), pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(begin));
    layer.groups[kv_write].assign(pending.begin() + static_cast<std::ptrdiff_t>(begin),
                                  pending.begin() + static_cast<std::ptrdiff_t>(end));
    auto& a = layer.groups[attention];
    a.insert(a.end(), pending.begin() + static_cast<std::ptrdiff_t>(end), pending.end());
    pending.clear();
  }

  std::int64_t d_;
  std::int64_t vocab_;
};

constexpr std::array<std::string_view, 10> k_kinds = {
    "norm", "gemm", "elementwise", "memcpy",      "attention",
    "gemm", "norm", "gemm",        "elementwise", "gemm"};

// The (query, key) pairs the simulator prices a layer's attention by (sim/cost/stack_work.hpp):
// per decode sequence its keys; per prefill sequence q*c + q(q+1)/2 causal pairs.
double attention_pairs(const Attention& a) {
  const auto q = static_cast<double>(a.queries);
  const double c = std::max(0.0, static_cast<double>(a.keys) - q);
  const double per_sequence =
      a.queries == 1 ? static_cast<double>(a.keys) : q * c + q * (q + 1) / 2;
  return static_cast<double>(a.sequences) * per_sequence;
}

// The recursion (1-based) whose "exitsim.recursion.<r>" range holds time t; 0 outside all.
int recursion_at(std::span<const Range> ranges, double t) {
  for (const Range& r : ranges) {
    constexpr std::string_view prefix = "exitsim.recursion.";
    if (r.name.starts_with(prefix) && r.start_us <= t && t <= r.end_us) {
      const std::string number = r.name.substr(prefix.size());
      if (!number.empty() &&
          std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::stoi(number);
    }
  }
  return 0;
}

ModelShape shape_of(const Trace& trace, const Step& step, std::size_t index) {
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
  // Two projections (gate, up) or one fused one split in two: gated; one without a split: plain.
  const bool split = std::any_of(
      first.groups[mlp_act].begin(), first.groups[mlp_act].end(), [](const Operator* op) {
        return op->name == "aten::chunk" || op->name == "aten::split" ||
               op->name == "aten::split_with_sizes" || op->name == "aten::unbind" ||
               op->name == "aten::slice" || op->name == "aten::narrow";
      });
  shape.mlp = first.gate_up.size() == 2 || split ? MlpKind::gated : MlpKind::plain;
  shape.ffn_dim =
      first.gate_up.size() == 1 && split ? first.gate_up[0].out / 2 : first.gate_up[0].out;
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
  return shape;
}

void add_sample(Samples& samples, TraceStep& step, const std::string& name, std::string_view kind,
                const OpSample& call) {
  auto& entry = samples[name];
  entry.first = std::string(kind);
  entry.second.push_back(call);
  step.calls.emplace_back(&samples.find(name)->first, call);
}

}  // namespace

void map_trace(const Trace& trace, Samples& samples, std::vector<TraceStep>& steps,
               ImportReport& report) {
  // Steps: the profiler's step ranges; without them, from one embedding to the next.
  std::vector<Range> bounds = trace.steps;
  if (bounds.empty()) {
    std::vector<double> starts;
    for (const Operator& op : trace.operators) {
      if (op.name == "aten::embedding")
        starts.push_back(op.start_us);
    }
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const double end = i + 1 < starts.size() ? starts[i + 1]
                                               : trace.operators.back().start_us +
                                                     trace.operators.back().duration_us + 1;
      bounds.push_back({"embedding", starts[i], end});
    }
  }
  std::size_t next = 0;
  for (std::size_t s = 0; s < bounds.size(); ++s) {
    const Range& bound = bounds[s];
    std::vector<const Operator*> in_step;
    while (next < trace.operators.size() && trace.operators[next].start_us < bound.start_us)
      ++next;
    // Half-open: an operator starting where this step ends starts the next one (the fallback's
    // next embedding; a whole-microsecond trace's next step).
    for (; next < trace.operators.size() && trace.operators[next].start_us < bound.end_us; ++next)
      in_step.push_back(&trace.operators[next]);
    const auto embedding = std::find_if(in_step.begin(), in_step.end(), [](const Operator* op) {
      return op->name == "aten::embedding" && op->input_dims.size() >= 2 &&
             op->input_dims[0].size() == 2;
    });
    if (embedding == in_step.end()) {
      ++report.skipped_steps;
      continue;
    }
    const Dims& table = (*embedding)->input_dims[0];
    StepMapper mapper(table[1], table[0]);
    Step step = mapper.map(
        std::span(in_step).subspan(static_cast<std::size_t>(embedding - in_step.begin() + 1)),
        *embedding);
    step.unmapped.insert(step.unmapped.begin(), in_step.begin(), embedding);
    if (!step.complete) {
      ++report.skipped_steps;
      continue;
    }
    ModelShape shape = shape_of(trace, step, s);
    shape.name = report.shape.name;
    if (report.steps > 0 && !(shape == report.shape)) {
      throw InputError(SourceLocation{trace.path, 0, 0, fmt::format("ProfilerStep[{}]", s)},
                       expected_found("the model of the earlier steps (" +
                                          sim::model_fingerprint(report.shape) + ")",
                                      sim::model_fingerprint(shape)));
    }
    report.shape = shape;

    TraceStep traced;
    traced.wall_us = bound.end_us - bound.start_us;
    const std::optional<std::int64_t> ids = product((*embedding)->input_dims[1]);
    traced.embedded = static_cast<double>(ids.value_or(0));
    traced.emitted = static_cast<double>(step.lm_rows);
    add_sample(samples, traced, std::string(ops::embed), "other",
               {traced.embedded, 0, step.embedding->duration_us});
    bool prefill = false;
    for (const Layer& layer : step.layers) {
      prefill = layer.attention.queries > 1;
      const double pairs = attention_pairs(layer.attention);
      for (std::size_t g = 0; g < layer.groups.size(); ++g) {
        std::string name(ops::layer[g]);
        if (prefill)
          name += ops::prefill_suffix;
        add_sample(samples, traced, name, k_kinds[g],
                   {static_cast<double>(layer.tokens), pairs, total_us(layer.groups[g])});
      }
    }
    add_sample(samples, traced, std::string(ops::lm_head), "lm_head",
               {traced.emitted, 0, total_us(step.lm_head)});
    add_sample(samples, traced, std::string(ops::sampling), "sampling",
               {traced.emitted, 0, total_us(step.sampling)});
    double mapped = 0;
    for (const auto& call : traced.calls)
      mapped += call.second.time_us;
    double unmapped = 0;
    for (const Operator* op : step.unmapped) {
      auto& [calls, us] = report.unmapped[op->name];
      ++calls;
      us += op->duration_us;
      unmapped += op->duration_us;
    }
    report.gap_us += std::max(0.0, traced.wall_us - mapped - unmapped);
    report.step_us += traced.wall_us;
    report.prefill_steps += prefill ? 1 : 0;
    ++report.steps;
    steps.push_back(std::move(traced));
  }
  report.unattributed_gpu_us += trace.unattributed_gpu_us;
  report.unattributed_kernels += trace.unattributed_kernels;
  report.graph_kernels += trace.graph_kernels;
}

}  // namespace exitsim::analysis::kineto
