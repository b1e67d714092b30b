#include "exitsim/sim/cost/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/core/model_validation.hpp"

namespace exitsim::sim {
namespace {

// Scratch sizes of the allocation-free evaluation. Graphs are checked against the first at
// construction; batches with more distinct depths than the second take the exact sweep path.
constexpr int k_max_graph_ops = 32;
constexpr int k_depth_slots = 32;

constexpr std::size_t at(BatchFeature f) {
  return static_cast<std::size_t>(f);
}
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

// Integer sums over a group of entries: exact, and cheap to add in the per-entry loop (integer
// adds stay in registers; the choice between decode and prefill compiles to selects). No member
// initialisers, so the per-call slot array is not zeroed: write `Counts c{}` for an empty sum.
struct Counts {
  std::int64_t tokens;
  std::int64_t decode_seqs;
  std::int64_t decode_kv;
  std::int64_t prefill_tokens;
  std::int64_t prefill_pairs;
  std::int64_t prefill_kv;

  void add(const BatchEntry& e) {
    const std::int64_t q = e.query_tokens;
    const std::int64_t c = e.context_tokens;
    const bool decode = q == 1;
    tokens += q;
    decode_seqs += decode ? 1 : 0;
    decode_kv += decode ? c + 1 : 0;
    prefill_tokens += decode ? 0 : q;
    prefill_pairs += decode ? 0 : q * c + q * (q + 1) / 2;
    prefill_kv += decode ? 0 : c + q;
  }
  void add(const Counts& o) {
    tokens += o.tokens;
    decode_seqs += o.decode_seqs;
    decode_kv += o.decode_kv;
    prefill_tokens += o.prefill_tokens;
    prefill_pairs += o.prefill_pairs;
    prefill_kv += o.prefill_kv;
  }
  BatchFeatures features() const {
    BatchFeatures x{};
    x[at(BatchFeature::tokens)] = as_double(tokens);
    x[at(BatchFeature::decode_seqs)] = as_double(decode_seqs);
    x[at(BatchFeature::decode_kv)] = as_double(decode_kv);
    x[at(BatchFeature::prefill_tokens)] = as_double(prefill_tokens);
    x[at(BatchFeature::prefill_pairs)] = as_double(prefill_pairs);
    x[at(BatchFeature::prefill_kv)] = as_double(prefill_kv);
    return x;
  }
};

// Shape numbers the op params are built from, as doubles.
struct Dims {
  double d_model, q_width, kv_width, ffn, vocab, dtype_bytes, kv_bytes;
  bool gated;
};

Dims dims_of(const ModelShape& m) {
  return {as_double(m.d_model),
          as_double(m.n_heads * m.head_dim),
          as_double(m.n_kv_heads * m.head_dim),
          as_double(m.ffn_dim),
          as_double(m.vocab),
          as_double(bytes_per_element(m.dtype)),
          as_double(m.kv_bytes_per_token_per_layer()),
          m.mlp == MlpKind::gated};
}

// A GEMM of T tokens by an (in x out) weight, with `lora` extra adapter weights folded into the
// same launch: weights read once, activations in and out once per token.
OpParams linear(double in, double out, double lora, double dtype_bytes) {
  OpParams p;
  p.add(BatchFeature::tokens, 2 * (in * out + lora), (in + out) * dtype_bytes);
  p.fixed_bytes = (in * out + lora) * dtype_bytes;
  return p;
}

// Fused residual add + RMSNorm, as serving engines run it: reads the input and the residual,
// writes the normalised output and the new residual, reads the norm weight.
OpParams norm(const Dims& s) {
  OpParams p;
  p.add(BatchFeature::tokens, 4 * s.d_model, 4 * s.d_model * s.dtype_bytes);
  p.fixed_bytes = s.d_model * s.dtype_bytes;
  return p;
}

// Attention reads the K/V it attends over, writes the new tokens' K/V into the cache, and reads
// Q and writes O. FLOPs are QK^T and PV: 2 x 2 x heads x head_dim per (query, key) pair.
OpParams attention(const Dims& s, BatchFeature queries, BatchFeature pairs, BatchFeature kv_read) {
  OpParams p;
  p.add(pairs, 4 * s.q_width, 0);
  p.add(kv_read, 0, s.kv_bytes);
  p.add(queries, 0, s.kv_bytes + 2 * s.q_width * s.dtype_bytes);
  p.launch_if = queries;
  return p;
}

OpParams layer_op(OpKind kind, const Dims& s, double rank) {
  switch (kind) {
    case OpKind::input_norm:
    case OpKind::post_attention_norm:
      return norm(s);
    case OpKind::qkv_projection:
      return linear(s.d_model, s.q_width + 2 * s.kv_width,
                    rank * (s.d_model + s.q_width) + 2 * rank * (s.d_model + s.kv_width),
                    s.dtype_bytes);
    case OpKind::attention_prefill:
      return attention(s, BatchFeature::prefill_tokens, BatchFeature::prefill_pairs,
                       BatchFeature::prefill_kv);
    case OpKind::attention_decode:
      return attention(s, BatchFeature::decode_seqs, BatchFeature::decode_kv,
                       BatchFeature::decode_kv);
    case OpKind::output_projection:
      return linear(s.q_width, s.d_model, rank * (s.q_width + s.d_model), s.dtype_bytes);
    case OpKind::mlp_gate_up: {
      const double matrices = s.gated ? 2 : 1;
      return linear(s.d_model, matrices * s.ffn, matrices * rank * (s.d_model + s.ffn),
                    s.dtype_bytes);
    }
    case OpKind::mlp_activation: {
      // Element-wise: SiLU(gate) * up reads two values and writes one; GELU reads one. The FLOP
      // counts are nominal (the op is memory-bound by a wide margin).
      OpParams p;
      p.add(BatchFeature::tokens, (s.gated ? 5 : 8) * s.ffn,
            (s.gated ? 3 : 2) * s.ffn * s.dtype_bytes);
      return p;
    }
    case OpKind::mlp_down:
      return linear(s.ffn, s.d_model, rank * (s.ffn + s.d_model), s.dtype_bytes);
    case OpKind::final_norm:
    case OpKind::lm_head:
    case OpKind::sampling:
      break;
  }
  throw std::logic_error("layer_op: not a layer op");
}

OpParams head_op(OpKind kind, const Dims& s) {
  switch (kind) {
    case OpKind::final_norm:
      return norm(s);
    case OpKind::lm_head: {
      // Logits only for the tokens that emit: one row of d_model in, one row of vocab out each.
      OpParams p;
      p.add(BatchFeature::emitting, 2 * s.d_model * s.vocab, (s.d_model + s.vocab) * s.dtype_bytes);
      p.fixed_bytes = s.d_model * s.vocab * s.dtype_bytes;
      p.launch_if = BatchFeature::emitting;
      return p;
    }
    case OpKind::sampling: {
      // Softmax and a sampling scan over fp32 logits: two passes over vocab per emitting token.
      OpParams p;
      p.add(BatchFeature::emitting, 5 * s.vocab, 2 * s.vocab * 4);
      p.launch_if = BatchFeature::emitting;
      return p;
    }
    default:
      break;
  }
  throw std::logic_error("head_op: not a head op");
}

// One transformer layer. The two attention kernels depend only on the QKV projection (they serve
// disjoint sequences); sharing stream 0 serialises them, as in engines that launch both.
OpGraph build_layer_graph() {
  OpGraph g;
  const int in_norm = g.add_op(OpKind::input_norm);
  const int qkv = g.add_op(OpKind::qkv_projection);
  const int prefill = g.add_op(OpKind::attention_prefill);
  const int decode = g.add_op(OpKind::attention_decode);
  const int out = g.add_op(OpKind::output_projection);
  const int post_norm = g.add_op(OpKind::post_attention_norm);
  const int gate_up = g.add_op(OpKind::mlp_gate_up);
  const int act = g.add_op(OpKind::mlp_activation);
  const int down = g.add_op(OpKind::mlp_down);
  g.add_dependency(in_norm, qkv);
  g.add_dependency(qkv, prefill);
  g.add_dependency(qkv, decode);
  g.add_dependency(prefill, out);
  g.add_dependency(decode, out);
  g.add_dependency(out, post_norm);
  g.add_dependency(post_norm, gate_up);
  g.add_dependency(gate_up, act);
  g.add_dependency(act, down);
  g.finalize();
  return g;
}

OpGraph build_head_graph() {
  OpGraph g;
  const int norm_op = g.add_op(OpKind::final_norm);
  const int head = g.add_op(OpKind::lm_head);
  const int sample = g.add_op(OpKind::sampling);
  g.add_dependency(norm_op, head);
  g.add_dependency(head, sample);
  g.finalize();
  return g;
}

void check_fraction(double value, const char* field) {
  if (!(value > 0 && value <= 1)) {
    throw InputError({"", 0, 0, field},
                     expected_found("a fraction in (0, 1]", fmt::format("{}", value)));
  }
}

// LoRA rank of each stack layer (0-based): that of its recursion, 0 in the prelude.
int lora_rank_of_layer(const DepthStructure& depth, int layer) {
  const int recursion = depth.recursion_of_depth(layer + 1);
  if (recursion == 0 || depth.lora_rank.empty())
    return 0;
  return depth.lora_rank[static_cast<std::size_t>(recursion - 1)];
}

}  // namespace

void OpParams::add(BatchFeature feature, double flops, double bytes) {
  std::size_t i = 0;
  while (i < used_terms && terms[i].feature != feature)
    ++i;
  if (i == used_terms) {
    if (used_terms == k_max_terms)
      throw std::logic_error("OpParams::add: too many features");
    terms[used_terms++].feature = feature;
  }
  terms[i].flops += flops;
  terms[i].bytes += bytes;
}

struct RooflineCostModel::Priced {
  double body_ns = 0;  // max(compute time, memory time)
  double duration_ns = 0;
  double flops = 0;
  double bytes = 0;
  bool launched = false;
  bool compute_bound = false;
};

struct RooflineCostModel::GraphTotals {
  double total = 0;
  double compute = 0;
  double memory = 0;
  double overhead = 0;
  double flops = 0;
  double bytes = 0;
};

RooflineCostModel::RooflineCostModel(const ModelShape& model, const HardwareSpec& hardware,
                                     RooflineEfficiency efficiency)
    : layer_graph_(build_layer_graph()), head_graph_(build_head_graph()) {
  if (const auto problem = find_shape_problem(model)) {
    throw InputError({"", 0, 0, "model." + problem->field}, problem->message);
  }
  check_fraction(efficiency.flops, "cost_model.flops_efficiency");
  check_fraction(efficiency.bandwidth, "cost_model.bandwidth_efficiency");
  const double peak = hardware.peak_flops_for(model.dtype);
  if (!(peak > 0)) {
    const std::string_view dtype = to_string(model.dtype);
    throw InputError({"", 0, 0, fmt::format("hardware.peak_tflops.{}", dtype)},
                     fmt::format("{} has no {} peak, which {} (dtype {}) needs; set "
                                 "hardware.peak_tflops.{} or choose another model.dtype",
                                 hardware.name, dtype, model.name, dtype, dtype));
  }
  if (!(hardware.memory_bandwidth > 0)) {
    throw InputError(
        {"", 0, 0, "hardware.memory_bandwidth_gbps"},
        expected_found("a positive bandwidth", fmt::format("{} B/s", hardware.memory_bandwidth)));
  }
  if (layer_graph_.size() > k_max_graph_ops || head_graph_.size() > k_max_graph_ops) {
    throw std::logic_error("RooflineCostModel: op graph larger than the evaluation scratch");
  }
  ns_per_flop_ = 1e9 / (peak * efficiency.flops);
  ns_per_byte_ = 1e9 / (hardware.memory_bandwidth * efficiency.bandwidth);
  launch_ns_ = as_double(hardware.launch_overhead);
  stacked_depth_ = model.depth.stacked_depth();
  coda_layers_ = model.depth.coda_layers;

  // Variants of the layer params: no LoRA first, then one per distinct rank in the stack.
  std::vector<int> ranks = {0};
  std::vector<int> variant_of_layer(static_cast<std::size_t>(stacked_depth_));
  for (int l = 0; l < stacked_depth_; ++l) {
    const int rank = lora_rank_of_layer(model.depth, l);
    auto it = std::find(ranks.begin(), ranks.end(), rank);
    if (it == ranks.end())
      it = ranks.insert(ranks.end(), rank);
    variant_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(it - ranks.begin());
  }
  variants_ = static_cast<int>(ranks.size());
  const Dims s = dims_of(model);
  for (const int rank : ranks) {
    for (int v = 0; v < layer_graph_.size(); ++v) {
      layer_params_.push_back(layer_op(layer_graph_.op(v).kind, s, rank));
    }
  }
  for (int v = 0; v < head_graph_.size(); ++v) {
    head_params_.push_back(head_op(head_graph_.op(v).kind, s));
  }
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  variant_prefix_.assign(static_cast<std::size_t>(variants_) * row, 0);
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    for (std::size_t l = 0; l + 1 < row; ++l) {
      const int here = variant_of_layer[l] == static_cast<int>(v) ? 1 : 0;
      variant_prefix_[v * row + l + 1] = variant_prefix_[v * row + l] + here;
    }
  }
}

int RooflineCostModel::clamp_depth(int depth) const {
  return std::clamp(depth, 0, stacked_depth_);
}

RooflineCostModel::Priced RooflineCostModel::price(const OpParams& params,
                                                   const BatchFeatures& x) const {
  Priced p;
  if (!(x[at(params.launch_if)] > 0))
    return p;
  double flops = 0;
  double bytes = params.fixed_bytes;
  for (const OpParams::Term& term : params.terms) {
    const double amount = x[at(term.feature)];
    flops += term.flops * amount;
    bytes += term.bytes * amount;
  }
  const double compute_ns = flops * ns_per_flop_;
  const double memory_ns = bytes * ns_per_byte_;
  p.launched = true;
  p.compute_bound = compute_ns > memory_ns;
  p.body_ns = p.compute_bound ? compute_ns : memory_ns;
  p.duration_ns = p.body_ns + launch_ns_;
  p.flops = flops;
  p.bytes = bytes;
  return p;
}

void RooflineCostModel::add_graph(const OpGraph& graph, const OpParams* params,
                                  const BatchFeatures& x, double repeat,
                                  GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  // Plain arrays, left uninitialised: only the first n entries are written and read.
  std::array<double, k_max_graph_ops> body;
  std::array<std::uint8_t, k_max_graph_ops> kind;  // 0 not launched, 1 memory-, 2 compute-bound
  std::array<double, k_max_graph_ops> duration;
  std::array<double, k_max_graph_ops> finish;
  std::array<int, k_max_graph_ops> via;
  double flops = 0;
  double bytes = 0;
  for (std::size_t v = 0; v < n; ++v) {
    const Priced p = price(params[v], x);
    body[v] = p.body_ns;
    kind[v] = p.launched ? (p.compute_bound ? 2 : 1) : 0;
    duration[v] = p.duration_ns;
    flops += p.flops;
    bytes += p.bytes;
  }
  const PathEnd end =
      graph.longest_path(std::span<const double>(duration.data(), n),
                         std::span<double>(finish.data(), n), std::span<int>(via.data(), n));
  double compute = 0;
  double memory = 0;
  double overhead = 0;
  for (int v = end.sink; v >= 0; v = via[static_cast<std::size_t>(v)]) {
    const auto vi = static_cast<std::size_t>(v);
    if (kind[vi] == 0)
      continue;
    overhead += launch_ns_;
    (kind[vi] == 2 ? compute : memory) += body[vi];
  }
  totals.total += repeat * end.length;
  totals.compute += repeat * compute;
  totals.memory += repeat * memory;
  totals.overhead += repeat * overhead;
  totals.flops += repeat * flops;
  totals.bytes += repeat * bytes;
}

void RooflineCostModel::add_stack_layers(int first, int last, const BatchFeatures& x,
                                         GraphTotals& totals) const {
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    const int layers = variant_prefix_[v * row + static_cast<std::size_t>(last)] -
                       variant_prefix_[v * row + static_cast<std::size_t>(first)];
    if (layers > 0)
      add_graph(layer_graph_, &layer_params_[v * ops], x, layers, totals);
  }
}

// Exact for any number of distinct depths: one pass per depth, each pricing the layers up to the
// next depth with the entries that reach it.
void RooflineCostModel::add_stack_by_sweep(std::span<const BatchEntry> batch,
                                           GraphTotals& totals) const {
  int done = 0;
  for (;;) {
    Counts reached{};
    int next = std::numeric_limits<int>::max();
    for (const BatchEntry& e : batch) {
      const int depth = clamp_depth(e.depth);
      if (e.query_tokens <= 0 || depth <= done)
        continue;
      reached.add(e);
      next = std::min(next, depth);
    }
    if (next == std::numeric_limits<int>::max())
      return;
    add_stack_layers(done, next, reached.features(), totals);
    done = next;
  }
}

IterationCost RooflineCostModel::iteration_cost(std::span<const BatchEntry> batch) const {
  struct Slot {
    int depth;
    Counts counts;
  };
  std::array<Slot, k_depth_slots> slots;
  int used = 0;
  // Adds a run of entries at one depth to its slot; false when the slots are full.
  const auto flush = [&](int depth, const Counts& run) {
    for (int i = 0; i < used; ++i) {
      Slot& slot = slots[static_cast<std::size_t>(i)];
      if (slot.depth == depth) {
        slot.counts.add(run);
        return true;
      }
    }
    if (used == k_depth_slots)
      return false;
    slots[static_cast<std::size_t>(used++)] = {depth, run};
    return true;
  };

  // One pass: sums per distinct depth (few: the exit points). Consecutive entries at one depth
  // are summed in registers and stored once.
  Counts run{};
  int run_depth = -1;
  std::int64_t emitting = 0;
  bool overflow = false;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    emitting += e.emits_token ? 1 : 0;
    const int depth = clamp_depth(e.depth);
    if (depth != run_depth) {
      if (run_depth >= 0 && !flush(run_depth, run)) {
        overflow = true;
        break;
      }
      run = Counts{};
      run_depth = depth;
    }
    run.add(e);
  }
  if (!overflow && run_depth >= 0 && !flush(run_depth, run))
    overflow = true;

  GraphTotals totals;
  BatchFeatures all{};
  if (!overflow) {
    const auto n = static_cast<std::size_t>(used);
    std::sort(slots.begin(), slots.begin() + used,
              [](const Slot& a, const Slot& b) { return a.depth < b.depth; });
    // Suffix sums: slot i then holds every entry at least as deep, i.e. the batch of its layers.
    for (std::size_t i = n; i-- > 1;)
      slots[i - 1].counts.add(slots[i].counts);
    int done = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (slots[i].depth > done) {
        add_stack_layers(done, slots[i].depth, slots[i].counts.features(), totals);
        done = slots[i].depth;
      }
    }
    if (n > 0)
      all = slots[0].counts.features();
  } else {
    add_stack_by_sweep(batch, totals);
    Counts every{};
    emitting = 0;
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      every.add(e);
      emitting += e.emits_token ? 1 : 0;
    }
    all = every.features();
  }
  // Coda layers run for every token, whatever its depth: later tokens attend over their K/V.
  if (coda_layers_ > 0)
    add_graph(layer_graph_, layer_params_.data(), all, coda_layers_, totals);
  all[at(BatchFeature::emitting)] = as_double(emitting);
  add_graph(head_graph_, head_params_.data(), all, 1, totals);

  IterationCost cost;
  cost.total = std::llround(totals.total);
  cost.overhead = std::llround(totals.overhead);
  cost.compute_bound = std::llround(totals.compute);
  cost.memory_bound = cost.total - cost.compute_bound - cost.overhead;
  if (cost.memory_bound < 0) {  // rounding when nothing on the path is memory-bound
    cost.compute_bound += cost.memory_bound;
    cost.memory_bound = 0;
  }
  cost.flops = totals.flops;
  cost.bytes = totals.bytes;
  return cost;
}

std::vector<OpCost> RooflineCostModel::op_breakdown(std::span<const BatchEntry> batch) const {
  std::vector<OpCost> ops;
  const auto emit_graph = [&](const OpGraph& graph, const OpParams* params, const BatchFeatures& x,
                              int layer) {
    for (int v = 0; v < graph.size(); ++v) {
      const Priced p = price(params[v], x);
      ops.push_back(
          {graph.op(v).kind, layer, p.launched, p.compute_bound, p.duration_ns, p.flops, p.bytes});
    }
  };
  Counts every{};
  double emitting = 0;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    every.add(e);
    if (e.emits_token)
      emitting += 1;
  }
  BatchFeatures all = every.features();
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto n_ops = static_cast<std::size_t>(layer_graph_.size());
  for (int l = 0; l < stacked_depth_; ++l) {
    Counts reached{};
    for (const BatchEntry& e : batch) {
      if (e.query_tokens > 0 && clamp_depth(e.depth) > l)
        reached.add(e);
    }
    const BatchFeatures x = reached.features();
    std::size_t variant = 0;
    const auto li = static_cast<std::size_t>(l);
    while (variant_prefix_[variant * row + li + 1] == variant_prefix_[variant * row + li]) {
      ++variant;
    }
    emit_graph(layer_graph_, &layer_params_[variant * n_ops], x, l);
  }
  for (int l = 0; l < coda_layers_; ++l) {
    emit_graph(layer_graph_, layer_params_.data(), all, stacked_depth_ + l);
  }
  all[at(BatchFeature::emitting)] = emitting;
  emit_graph(head_graph_, head_params_.data(), all, -1);
  return ops;
}

}  // namespace exitsim::sim
