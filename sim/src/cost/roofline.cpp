#include "exitsim/sim/cost/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/core/model_validation.hpp"
#include "micro_batches.hpp"
#include "op_rates.hpp"
#include "roofline_ops.hpp"

namespace exitsim::sim {
namespace {

// Scratch sizes of the allocation-free evaluation. Graphs are checked against the first at
// construction; batches with more distinct depths (or boundaries of other work) than the second
// take the exact sweep path.
constexpr int k_max_graph_ops = 32;
constexpr std::size_t k_depth_slots = 32;

constexpr std::size_t at(BatchFeature f) {
  return static_cast<std::size_t>(f);
}
double as_double(std::int64_t v) {
  return static_cast<double>(v);
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

// x^(2/3) for x in [1, 2], within 2e-8 of it: a degree-7 polynomial (least squares on Chebyshev
// nodes) in x - 1.5, a few multiply-adds where std::cbrt costs several times more on the price's
// hot path.
[[gnu::always_inline]] inline double two_thirds_power_on_1_2(double x) {
  const double t = x - 1.5;
  double p = 0.00095873511065716513;
  p = p * t - 0.0018346310103032786;
  p = p * t + 0.0032849268944008477;
  p = p * t - 0.0074175248816632693;
  p = p * t + 0.019175287011642842;
  p = p * t - 0.064711636282574606;
  p = p * t + 0.58238693751288739;
  return p * t + 1.310370712682785;
}

// A kernel's time from its compute and memory times: the larger, or near the ridge the two
// blended as (compute^k + memory^k)^(1/k) (KernelCorrections::ridge_exponent; 0: the larger).
// Both are scaled by the larger first, so that the powers stay finite.
[[gnu::always_inline]] inline double ridge_time(double compute_ns, double memory_ns,
                                                double exponent) {
  const double larger = compute_ns > memory_ns ? compute_ns : memory_ns;
  if (exponent <= 0 || !(larger > 0))
    return larger;
  const double smaller = compute_ns > memory_ns ? memory_ns : compute_ns;
  const double ratio = smaller > 0 ? smaller / larger : 0.0;
  // The presets' exponents by roots, not powers: this is the price's hot path (two pow calls
  // tripled the price of a mixed prefill iteration).
  if (exponent == 2)
    return larger * std::sqrt(1 + ratio * ratio);
  if (exponent == 1.5)
    return larger * two_thirds_power_on_1_2(1 + ratio * std::sqrt(ratio));
  return larger * std::pow(1 + std::pow(ratio, exponent), 1 / exponent);
}

double flops_of(const OpParams& params, const BatchFeatures& x) {
  double flops = 0;
  for (const OpParams::Term& term : params.terms)
    flops += term.flops * x[at(term.feature)];
  return flops;
}

// An entry whose stack work is its queries running layers 1..depth with its own context: the
// common case, summed in registers and stored once per run of equal depths.
bool plain_run(const BatchEntry& e) {
  return e.start_depth <= 0 && e.pending_tokens <= 0 && e.recursion_context_count == 0 &&
         !e.reuse_first_recursion_kv && e.coda == BatchEntry::Coda::from_start;
}

// The sums of a run of plain entries: only the features they touch, so that the per-entry loop
// keeps them in registers.
struct PlainRun {
  std::int64_t tokens;
  std::int64_t decode_seqs;
  std::int64_t decode_kv;
  std::int64_t prefill_tokens;
  std::int64_t prefill_pairs;
  std::int64_t prefill_kv;
  // state_copy's exited tokens: K/V-only from their depth to the top of the stack.
  std::int64_t kv_to_top;

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
  WorkCounts counts() const {
    WorkCounts w{};
    w.tokens = tokens;
    w.decode_seqs = decode_seqs;
    w.decode_kv = decode_kv;
    w.prefill_tokens = prefill_tokens;
    w.prefill_pairs = prefill_pairs;
    w.prefill_kv = prefill_kv;
    return w;
  }
};

// Entries that run layers 1..depth, summed per depth (suffix sums give each layer's batch), and
// the K/V-only tokens of those that go on so to the top (state_copy), which join the batch here.
struct DepthSlot {
  int depth;
  WorkCounts counts;
  std::int64_t kv_to_top;

  void clear() {
    counts = WorkCounts{};
    kv_to_top = 0;
  }
};

// Signed changes, at one layer boundary, of the batch and of its masked part: the work of
// entries that is not a plain run from layer 1 (mid-stack starts, joining pending tokens,
// per-recursion contexts and K/V reuse, K/V-only layers, masked layers).
struct DeltaSlot {
  int depth;
  WorkCounts run;
  WorkCounts masked;

  // Member by member: the compiler clears the whole slot with `rep stos`, whose start-up costs
  // more than the rest of a new slot's work.
  void clear() {
    run = WorkCounts{};
    masked = WorkCounts{};
  }
};

// A fixed-capacity map from boundary layer to slot (boundaries are few: the exit points). The
// depths are searched in an array of their own, and sort() orders slot indices, not the slots
// (which are large): both keep the per-entry loop off long strides and big moves. Slots are left
// uninitialised until used.
template <class Slot>
struct SlotTable {
  std::array<int, k_depth_slots> depths;
  std::array<Slot, k_depth_slots> slots;
  std::array<std::uint8_t, k_depth_slots> order;  // after sort(): slot indices by depth
  std::size_t used = 0;

  // nullptr when full.
  Slot* find(int depth) {
    // Without an early exit: the depths come in random order, and a branch on each comparison
    // mispredicts. They are distinct, so at most one matches.
    std::size_t found = used;
    for (std::size_t i = 0; i < used; ++i)
      found = depths[i] == depth ? i : found;
    if (found < used)
      return &slots[found];
    if (used == k_depth_slots)
      return nullptr;
    depths[used] = depth;
    Slot& slot = slots[used++];
    slot.clear();
    slot.depth = depth;
    return &slot;
  }
  // Depths are distinct, so each slot's rank is the count of smaller depths: counted without
  // branches (an insertion sort mispredicts on the random order the exits come in).
  void sort() {
    for (std::size_t i = 0; i < used; ++i) {
      std::size_t rank = 0;
      for (std::size_t j = 0; j < used; ++j)
        rank += depths[j] < depths[i] ? 1U : 0U;
      order[rank] = static_cast<std::uint8_t>(i);
    }
  }
  // The i-th slot by depth, after sort().
  Slot& sorted(std::size_t i) { return slots[order[i]]; }
};

// The changes of the batch at layer boundaries: the work of entries that is not a plain run from
// layer 1. Those at layer 0 only set the batch the walk starts from, so they are summed apart
// (no slot to find, no boundary to walk over).
struct Changes {
  SlotTable<DeltaSlot> deltas;
  WorkCounts at_first_layer{};
};

// Adds plus - minus at layer `depth` to the run (masked == false) or masked part of the changes.
// Inlined so that the counts stay in registers (and the difference is stored once).
[[gnu::always_inline]] inline bool add_delta(Changes& changes, int depth, const WorkCounts& plus,
                                             const WorkCounts& minus, bool masked) {
  WorkCounts change = plus;
  change.subtract(minus);
  if (depth == 0 && !masked) {
    changes.at_first_layer.add(change);
    return true;
  }
  DeltaSlot* slot = changes.deltas.find(depth);
  if (slot == nullptr)
    return false;
  (masked ? slot->masked : slot->run).add(change);
  return true;
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

// Inlined into the graph loops: an out-of-line call returning the struct through memory cost
// more than the pricing itself.
[[gnu::always_inline]] inline RooflineCostModel::Priced RooflineCostModel::price(
    const OpParams& params, const BatchFeatures& x) const {
  Priced p;
  if (!(x[at(params.launch_if)] > 0))
    return p;
  if (params.collective) {
    double link_bytes = 0;
    for (std::size_t i = 0; i < params.used_terms; ++i)
      link_bytes += params.terms[i].bytes * x[at(params.terms[i].feature)];
    p.launched = true;
    p.communication = true;
    p.body_ns = link_bytes * params.ns_per_byte + params.fixed_ns;
    p.duration_ns = p.body_ns + launch_ns_;
    return p;
  }
  double flops = 0;
  double bytes = params.fixed_bytes;
  // Only the used terms: most ops have one or two of the four.
  for (std::size_t i = 0; i < params.used_terms; ++i) {
    const OpParams::Term& term = params.terms[i];
    const double amount = x[at(term.feature)];
    flops += term.flops * amount;
    bytes += term.bytes * amount;
  }
  if (params.expert_imbalance != 0) {
    const double tokens = x[at(BatchFeature::tokens)];
    const double busiest =
        std::min(1 + params.expert_imbalance / std::sqrt(tokens), params.expert_imbalance_cap);
    if (params.balanced_flops == 0 && params.balanced_bytes == 0) {
      flops *= busiest;
      bytes = params.fixed_bytes + (bytes - params.fixed_bytes) * busiest;
    } else {
      const double even_flops = params.balanced_flops * tokens;
      const double even_bytes = params.fixed_bytes + params.balanced_bytes * tokens;
      flops = even_flops + (flops - even_flops) * busiest;
      bytes = even_bytes + (bytes - even_bytes) * busiest;
    }
  }
  if (params.routed_weight_bytes != 0) {
    bytes += params.routed_weight_bytes *
             (1 - std::pow(params.expert_miss, x[at(BatchFeature::tokens)]));
  }
  const double compute_ns = flops * params.ns_per_flop;
  const double memory_ns = bytes * params.ns_per_byte;
  p.launched = true;
  p.compute_bound = compute_ns > memory_ns;
  p.body_ns = ridge_time(compute_ns, memory_ns, ridge_exponent_) + params.fixed_ns +
              params.ns_per_unit * x[at(params.timed_feature)];
  p.duration_ns = p.body_ns + launch_ns_;
  p.flops = flops;
  p.bytes = bytes;
  return p;
}

HardwareSpec counting_hardware(const ModelShape& model, const ParallelSpec& parallel) {
  HardwareSpec h;
  h.name = "counts-only";
  h.set_peak_flops(model.dtype, 1e15);
  h.memory_bandwidth = 1e12;
  // One node holding the whole replica, with links for its collectives and hand-offs.
  h.interconnect.link_bandwidth = 1e12;
  h.interconnect.node_link_bandwidth = 1e12;
  h.interconnect.gpus_per_node = std::max(1, parallel.gpus());
  return h;
}

IterationCost measured_cost(double microseconds, const IterationCost& counted,
                            const std::string& source) {
  if (!std::isfinite(microseconds) || microseconds > k_max_iteration_us) {
    throw InputError(
        {source, 0, 0, "cost_model.profile"},
        expected_found(fmt::format("iteration prices under {:g} us", k_max_iteration_us),
                       fmt::format("{:.4g} us for an iteration of {} FLOPs: the profile's prices "
                                   "extrapolate far beyond what was measured (calibrate from "
                                   "measurements that cover these batches) or an entry is wrong",
                                   microseconds, counted.flops)));
  }
  IterationCost cost;
  cost.total = static_cast<TimeNs>(std::llround(microseconds * static_cast<double>(k_ns_per_us)));
  cost.flops = counted.flops;
  cost.bytes = counted.bytes;
  cost.masked_flops = counted.masked_flops;
  return cost;
}

RooflineCostModel::RooflineCostModel(const ModelShape& model, const HardwareSpec& hardware,
                                     RooflineEfficiency efficiency, ParallelSpec parallel,
                                     bool exit_probes)
    : layer_graph_(roofline_ops::build_layer_graph(parallel.tensor > 1, model.is_moe())),
      head_graph_(roofline_ops::build_head_graph(parallel.tensor > 1)),
      probe_graph_(roofline_ops::build_probe_graph(parallel.tensor > 1)) {
  if (const auto problem = find_shape_problem(model)) {
    throw InputError({"", 0, 0, "model." + problem->field}, problem->message);
  }
  if (const auto problem = find_parallel_problem(model, parallel, hardware)) {
    throw InputError({"", 0, 0, "parallel." + problem->field}, problem->message);
  }
  if (const auto problem = find_link_problem(parallel, hardware)) {
    throw InputError({"", 0, 0, problem->field}, problem->message);
  }
  const TensorShard shard = TensorShard::of(model, parallel);
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
  check_corrections(hardware);
  const OpRates rates(hardware, peak, efficiency, parallel.tensor > 1);
  launch_ns_ = as_double(hardware.launch_overhead);
  ridge_exponent_ = hardware.kernels.ridge_exponent;
  layout_ = StackLayout(model.depth);
  // Each hand-off sends the hidden state and the residual of every token (vLLM's
  // IntermediateTensors), each GPU of the TP group its own copy over its own link.
  const double activation_bytes =
      2 * as_double(model.d_model) * as_double(bytes_per_element(model.dtype));
  for (const PipelineStage& stage : split_pipeline(model.depth.full_depth(), parallel.pipeline)) {
    stages_.push_back({stage.first, stage.last, stage.last_stage});
    if (stage.last_stage)
      break;
    const bool remote = hand_off_crosses_nodes(static_cast<int>(stages_.size()) - 1, parallel,
                                               hardware.interconnect.gpus_per_node);
    const Interconnect& link = hardware.interconnect;
    const double bandwidth = remote ? link.node_link_bandwidth : link.link_bandwidth;
    const double share = remote
                             ? or_default(link.node_link_efficiency, efficiency.bandwidth)
                             : or_default(link.send_efficiency,
                                          or_default(link.link_efficiency, efficiency.bandwidth));
    hand_off_ns_per_token_.push_back(activation_bytes * 1e9 / (bandwidth * share));
    hand_off_fixed_ns_.push_back(as_double(remote ? link.node_link_latency : link.send_latency) +
                                 as_double(hardware.launch_overhead));
  }
  stacked_depth_ = model.depth.stacked_depth();
  coda_layers_ = model.depth.coda_layers;

  // Variants of the layer params: no LoRA, the model's own MLP and whole-context attention
  // first (what the coda and op_cost use), then one per distinct LoRA rank, dense layer of a
  // mixture or windowed layer in the stack (layers of a plain stack are its unique layers).
  std::vector<roofline_ops::LayerVariant> variants = {{}};
  std::vector<int> variant_of_layer(static_cast<std::size_t>(stacked_depth_));
  for (int l = 0; l < stacked_depth_; ++l) {
    const roofline_ops::LayerVariant variant{lora_rank_of_layer(model.depth, l),
                                             model.is_moe() && !model.layer_is_moe(l),
                                             model.layer_is_windowed(l)};
    auto it = std::find(variants.begin(), variants.end(), variant);
    if (it == variants.end())
      it = variants.insert(variants.end(), variant);
    variant_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(it - variants.begin());
  }
  variants_ = static_cast<int>(variants.size());
  for (const roofline_ops::LayerVariant& variant : variants)
    windowed_.push_back(variant.windowed ? 1 : 0);
  if (std::find(windowed_.begin(), windowed_.end(), 1) != windowed_.end())
    window_ = model.window;
  const auto params_of = [&](OpKind kind, const roofline_ops::LayerVariant& variant) {
    OpParams params;
    if (kind == OpKind::tp_all_reduce || kind == OpKind::logits_gather ||
        kind == OpKind::probe_reduce)
      params = roofline_ops::collective_op(kind, model, shard);
    else if (kind == OpKind::final_norm || kind == OpKind::lm_head || kind == OpKind::sampling ||
             kind == OpKind::probe_norm || kind == OpKind::probe_head ||
             kind == OpKind::probe_softmax)
      params = roofline_ops::head_op(kind, model, shard);
    else
      params = roofline_ops::layer_op(kind, model, variant, shard);
    rates.apply(kind, shard, params);
    return params;
  };
  for (const roofline_ops::LayerVariant& variant : variants) {
    for (int v = 0; v < layer_graph_.size(); ++v)
      layer_params_.push_back(params_of(layer_graph_.op(v).kind, variant));
    kv_params_.push_back(params_of(OpKind::kv_projection, variant));
  }
  for (int v = 0; v < head_graph_.size(); ++v)
    head_params_.push_back(params_of(head_graph_.op(v).kind, {}));
  for (int v = 0; v < probe_graph_.size(); ++v)
    probe_params_.push_back(params_of(probe_graph_.op(v).kind, {}));
  if (exit_probes) {
    for (const int point : model.depth.effective_exit_points()) {
      if (point < stacked_depth_)
        probe_points_.push_back(point);
    }
  }
  // The token-only ops: all they read (launch_if and their terms; a mixture's routed weights
  // depend on the token count alone) is the token count and the K/V reuse features, which
  // add_graph() requires to be zero for a lookup.
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  for (std::size_t op = 0; op < ops; ++op) {
    bool only = true;
    for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
      const OpParams& params = layer_params_[v * ops + op];
      // An op a variant lacks (launch_if never) reads nothing.
      only = only &&
             (params.launch_if == BatchFeature::tokens || params.launch_if == BatchFeature::never);
      for (std::size_t t = 0; t < params.used_terms; ++t) {
        const BatchFeature f = params.terms[t].feature;
        only = only && (f == BatchFeature::tokens || f == BatchFeature::kv_reuse_tokens ||
                        f == BatchFeature::kv_reuse_all);
      }
    }
    token_only_.push_back(only ? 1 : 0);
  }
  token_prices_.resize(static_cast<std::size_t>(variants_) * k_token_table * ops);
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    for (std::size_t t = 0; t < k_token_table; ++t) {
      BatchFeatures x{};
      x[at(BatchFeature::tokens)] = static_cast<double>(t);
      for (std::size_t op = 0; op < ops; ++op) {
        if (token_only_[op] != 0)
          token_prices_[(v * k_token_table + t) * ops + op] = price(layer_params_[v * ops + op], x);
      }
    }
  }

  build_layer_sums();

  // Likewise the K/V-only projection, when all it reads is its token count and whether they are
  // alone (kv_tabled() requires the latter to be zero).
  bool kv_only = true;
  for (const OpParams& params : kv_params_) {
    kv_only = kv_only && params.launch_if == BatchFeature::kv_only_tokens;
    for (std::size_t t = 0; t < params.used_terms; ++t) {
      const BatchFeature f = params.terms[t].feature;
      kv_only = kv_only && (f == BatchFeature::kv_only_tokens || f == BatchFeature::kv_only_alone);
    }
  }
  for (std::size_t v = 0; kv_only && v < static_cast<std::size_t>(variants_); ++v) {
    for (std::size_t t = 0; t < k_token_table; ++t) {
      BatchFeatures x{};
      x[at(BatchFeature::kv_only_tokens)] = static_cast<double>(t);
      kv_prices_.push_back(price(kv_params_[v], x));
    }
  }

  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  variant_prefix_.assign(static_cast<std::size_t>(variants_) * row, 0);
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    for (std::size_t l = 0; l + 1 < row; ++l) {
      const int here = variant_of_layer[l] == static_cast<int>(v) ? 1 : 0;
      variant_prefix_[v * row + l + 1] = variant_prefix_[v * row + l] + here;
    }
  }

  // The head's prices for up to k_token_table tokens that all emit, when all its ops read is
  // those two counts: add_graph's own totals, so a lookup adds the same doubles.
  const auto counts_only = [](BatchFeature f) {
    return f == BatchFeature::tokens || f == BatchFeature::emitting;
  };
  bool head_reads_counts_only = true;
  for (const OpParams& params : head_params_) {
    head_reads_counts_only = head_reads_counts_only && counts_only(params.launch_if);
    for (std::size_t t = 0; t < params.used_terms; ++t)
      head_reads_counts_only = head_reads_counts_only && counts_only(params.terms[t].feature);
  }
  for (std::size_t t = 0; head_reads_counts_only && t < k_token_table; ++t) {
    BatchFeatures x{};
    x[at(BatchFeature::tokens)] = static_cast<double>(t);
    x[at(BatchFeature::emitting)] = static_cast<double>(t);
    GraphTotals alone;
    add_graph(head_graph_, head_params_.data(), nullptr, x, 1, alone);
    head_prices_.push_back(alone);
  }
}

int RooflineCostModel::clamp_depth(int depth) const {
  return std::clamp(depth, 0, stacked_depth_);
}

std::size_t RooflineCostModel::variant_of_layer(int layer) const {
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto l = static_cast<std::size_t>(layer);
  std::size_t variant = 0;
  while (variant_prefix_[variant * row + l + 1] == variant_prefix_[variant * row + l])
    ++variant;
  return variant;
}

void RooflineCostModel::build_layer_sums() {
  const OpGraph& graph = layer_graph_;
  // The layer's sum order: its token-only ops, then the others, each in topological order.
  layer_sum_order_ = graph.topological_order();
  const auto others =
      std::stable_partition(layer_sum_order_.begin(), layer_sum_order_.end(),
                            [&](int v) { return token_only_[static_cast<std::size_t>(v)] != 0; });
  layer_token_ops_ = static_cast<std::size_t>(others - layer_sum_order_.begin());
  if (!graph.chain() || !(launch_ns_ >= 0))
    return;
  const auto n = static_cast<std::size_t>(graph.size());
  for (std::size_t row = 0; row < static_cast<std::size_t>(variants_) * k_token_table; ++row) {
    const Priced* prices = &token_prices_[row * n];
    ChainSums sums;
    for (std::size_t i = 0; i < layer_token_ops_; ++i)
      sums.add(prices[static_cast<std::size_t>(layer_sum_order_[i])], launch_ns_);
    tabled_chains_.push_back(sums);
  }
}

bool RooflineCostModel::add_tabled_chain(const Priced* tabled, const OpParams* params,
                                         const BatchFeatures& x, double repeat,
                                         GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(layer_graph_.size());
  // The walk's sums over the token-only ops come from the table; the others are added in the
  // walk's order, so the doubles are the walk's.
  ChainSums sums = tabled_chains_[static_cast<std::size_t>(tabled - token_prices_.data()) / n];
  for (std::size_t i = layer_token_ops_; i < n; ++i) {
    const auto v = static_cast<std::size_t>(layer_sum_order_[i]);
    sums.add(price(params[v], x), launch_ns_);
  }
  if (!sums.nonnegative)
    return false;  // the graph walk decides
  totals.add_path(repeat, sums.length, sums.part, sums.overhead, sums.flops, sums.bytes);
  return true;
}

void RooflineCostModel::add_graph(const OpGraph& graph, const OpParams* params,
                                  const Priced* token_prices, const BatchFeatures& x, double repeat,
                                  GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  // The table row of this token count, when the token-only ops see nothing else: then price()
  // would read exactly the values it was tabulated with.
  const double tokens = x[at(BatchFeature::tokens)];
  const Priced* tabled = nullptr;
  if (token_prices != nullptr && tokens >= 0 && tokens < static_cast<double>(k_token_table) &&
      static_cast<double>(static_cast<std::size_t>(tokens)) == tokens &&
      x[at(BatchFeature::kv_reuse_tokens)] == 0 && x[at(BatchFeature::kv_reuse_all)] == 0) {
    tabled = token_prices + static_cast<std::size_t>(tokens) * n;
  }
  const std::vector<int>& order =
      &graph == &layer_graph_ ? layer_sum_order_ : graph.topological_order();
  if (counts_only_ && counts_regroup_exactly_ && !totals.ordered) {
    // Integer FLOPs in any order: the launch classes' dot products.
    const LinearCounts& classes =
        params == head_params_.data()
            ? head_linear_
            : layer_linear_[static_cast<std::size_t>(params - layer_params_.data()) / n];
    double counted_flops = 0;
    double counted_bytes = 0;
    for (const LaunchClass& c : classes) {
      if (!(x[c.launch] > 0))
        continue;
      double class_flops = 0;
      double class_bytes = c.fixed_bytes;
      for (std::size_t t = 0; t < c.terms; ++t) {
        const double amount = x[c.feature[t]];
        class_flops += c.flops[t] * amount;
        class_bytes += c.bytes[t] * amount;
      }
      counted_flops += class_flops;
      counted_bytes += class_bytes;
    }
    totals.flops += repeat * counted_flops;
    totals.bytes += repeat * counted_bytes;
    return;
  }
  if (counts_only_) {
    // The same sums in the same order as below, without the times.
    double counted_flops = 0;
    double counted_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::size_t>(order[i]);
      const Priced p = tabled != nullptr && token_only_[v] != 0 ? tabled[v] : price(params[v], x);
      counted_flops += p.flops;
      counted_bytes += p.bytes;
    }
    totals.flops += repeat * counted_flops;
    totals.bytes += repeat * counted_bytes;
    return;
  }
  if (tabled != nullptr && !tabled_chains_.empty()) {
#ifndef NDEBUG
    // Debug builds hold the table's shortcut to the walk's doubles on every call.
    GraphTotals shortcut = totals;
    if (add_tabled_chain(tabled, params, x, repeat, shortcut)) {
      walk_graph(graph, order, params, tabled, x, repeat, totals);
      const auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
      if (!same(shortcut.total, totals.total) || !same(shortcut.compute, totals.compute) ||
          !same(shortcut.memory, totals.memory) ||
          !same(shortcut.communication, totals.communication) ||
          !same(shortcut.overhead, totals.overhead) || !same(shortcut.flops, totals.flops) ||
          !same(shortcut.bytes, totals.bytes)) {
        throw std::logic_error("RooflineCostModel: the tabled chain differs from the graph walk");
      }
      return;
    }
#else
    if (add_tabled_chain(tabled, params, x, repeat, totals))
      return;
#endif
  }
  walk_graph(graph, order, params, tabled, x, repeat, totals);
}

void RooflineCostModel::walk_graph(const OpGraph& graph, const std::vector<int>& sum_order,
                                   const OpParams* params, const Priced* tabled,
                                   const BatchFeatures& x, double repeat,
                                   GraphTotals& totals) const {
  const auto n = static_cast<std::size_t>(graph.size());
  // In a chain every op waits for the one before it in topological order (on one stream, or
  // handed between streams as a TP layer's all-reduces are), so while no duration is negative
  // the longest path is the sum of every op's duration and holds every launched op. The sum is
  // taken in `sum_order` (the layer's token-only ops first), so that its first part is the same
  // for every batch of a token count and can be tabled (tabled_chains_). It differs from the
  // running sum in topological order (what longest_path gives) only by rounding, and an op whose
  // duration rounding absorbs still counts as on the path (its parts and launch).
  assert(sum_order.size() == n);
  if (graph.chain() && launch_ns_ >= 0) {
    ChainSums sums;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::size_t>(sum_order[i]);
      sums.add(tabled != nullptr && token_only_[v] != 0 ? tabled[v] : price(params[v], x),
               launch_ns_);
    }
    if (sums.nonnegative) {
      totals.add_path(repeat, sums.length, sums.part, sums.overhead, sums.flops, sums.bytes);
      return;
    }
  }
  // Plain arrays, left uninitialised: only the first n entries are written and read.
  std::array<double, k_max_graph_ops> body;
  std::array<std::uint8_t, k_max_graph_ops> kind;  // Priced::part()
  std::array<double, k_max_graph_ops> duration;
  double flops = 0;
  double bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::size_t>(sum_order[i]);
    const Priced p = tabled != nullptr && token_only_[v] != 0 ? tabled[v] : price(params[v], x);
    body[v] = p.body_ns;
    kind[v] = p.part();
    duration[v] = p.duration_ns;
    flops += p.flops;
    bytes += p.bytes;
  }
  std::array<double, 4> part{};  // by kind
  double overhead = 0;
  std::array<double, k_max_graph_ops> finish;
  std::array<int, k_max_graph_ops> via;
  const PathEnd path =
      graph.longest_path(std::span<const double>(duration.data(), n),
                         std::span<double>(finish.data(), n), std::span<int>(via.data(), n));
  for (int v = path.sink; v >= 0; v = via[static_cast<std::size_t>(v)]) {
    const auto vi = static_cast<std::size_t>(v);
    if (kind[vi] == 0)
      continue;
    overhead += launch_ns_;
    part[kind[vi]] += body[vi];
  }
  totals.add_path(repeat, path.length, part, overhead, flops, bytes);
}

const RooflineCostModel::Priced* RooflineCostModel::kv_tabled(std::size_t variant,
                                                              const BatchFeatures& x) const {
  const double tokens = x[at(BatchFeature::kv_only_tokens)];
  if (!kv_prices_.empty() && x[at(BatchFeature::kv_only_alone)] == 0 && tokens >= 0 &&
      tokens < static_cast<double>(k_token_table) &&
      static_cast<double>(static_cast<std::size_t>(tokens)) == tokens) {
    return &kv_prices_[variant * k_token_table + static_cast<std::size_t>(tokens)];
  }
  return nullptr;
}

void RooflineCostModel::add_stack_layers(int first, int last, const WorkCounts& run,
                                         const WorkCounts* windowed_run, const LayerWindow& window,
                                         GraphTotals& totals) const {
  first = std::max(first, window.first);
  last = std::min(last, std::min(window.last, stacked_depth_));
  if (last <= first)
    return;
  const BatchFeatures whole = run.features();
  // Windowed layers see the keys of their window (add_stack_by_sweep counts them).
  BatchFeatures windowed_x;
  if (windowed_run != nullptr)
    windowed_x = windowed_run->features();
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    const int layers = variant_prefix_[v * row + static_cast<std::size_t>(last)] -
                       variant_prefix_[v * row + static_cast<std::size_t>(first)];
    if (layers <= 0)
      continue;
    const BatchFeatures& x = windowed_run != nullptr && windowed_[v] != 0 ? windowed_x : whole;
    if (run.tokens > 0)
      add_graph(layer_graph_, &layer_params_[v * ops], &token_prices_[v * k_token_table * ops], x,
                layers, totals);
    if (run.kv_only_tokens > 0)
      add_serial_op(kv_params_[v], kv_tabled(v, x), x, layers, totals);
  }
}

double RooflineCostModel::masked_flops(int first, int last, const BatchFeatures& run_x,
                                       const WorkCounts& masked, const WorkCounts* windowed_masked,
                                       const LayerWindow& window) const {
  first = std::max(first, window.first);
  last = std::min(last, std::min(window.last, stacked_depth_));
  if (masked.tokens <= 0 || last <= first)
    return 0;
  const BatchFeatures whole = masked.features();
  BatchFeatures windowed_x;
  if (windowed_masked != nullptr)
    windowed_x = windowed_masked->features();
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  const auto ops = static_cast<std::size_t>(layer_graph_.size());
  double flops = 0;
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    const int layers = variant_prefix_[v * row + static_cast<std::size_t>(last)] -
                       variant_prefix_[v * row + static_cast<std::size_t>(first)];
    if (layers <= 0)
      continue;
    const BatchFeatures& x = windowed_masked != nullptr && windowed_[v] != 0 ? windowed_x : whole;
    double per_layer = 0;
    for (std::size_t op = 0; op < ops; ++op) {
      const OpParams& params = layer_params_[v * ops + op];
      if (run_x[at(params.launch_if)] > 0)
        per_layer += flops_of(params, x);
    }
    flops += layers * per_layer;
  }
  return flops;
}

void RooflineCostModel::add_serial_op(const OpParams& params, const Priced* tabled,
                                      const BatchFeatures& x, double repeat,
                                      GraphTotals& totals) const {
  const Priced p = tabled != nullptr ? *tabled : price(params, x);
  if (!p.launched)
    return;
  totals.total += repeat * p.duration_ns;
  (p.compute_bound ? totals.compute : totals.memory) += repeat * p.body_ns;
  totals.overhead += repeat * launch_ns_;
  totals.flops += repeat * p.flops;
  totals.bytes += repeat * p.bytes;
}

// Exact for any number of boundaries: one pass over the batch per group of layers, each summing
// the entries' work at the group's first layer and finding where the next group begins.
void RooflineCostModel::add_stack_by_sweep(std::span<const BatchEntry> batch,
                                           const LayerWindow& window, GraphTotals& totals) const {
  // A model with windowed layers also sums each group as those layers see it.
  const AttentionWindow* windowed = window_.none() ? nullptr : &window_;
  int done = 0;
  for (;;) {
    WorkCounts run{};
    WorkCounts masked{};
    WorkCounts windowed_run{};
    WorkCounts windowed_masked{};
    int next = std::numeric_limits<int>::max();
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      const EntrySpan s = layout_.span_of(e);
      if (s.kv_end <= done)
        continue;
      run.add(layout_.work_at(e, s, done));
      masked.add(layout_.masked_at(e, s, done));
      if (windowed != nullptr) {
        windowed_run.add(layout_.work_at(e, s, done, windowed));
        windowed_masked.add(layout_.masked_at(e, s, done, windowed));
      }
      StackLayout::Breakpoints points;
      const std::size_t n = layout_.breakpoints(e, s, points);
      for (std::size_t i = 0; i < n; ++i) {
        if (points[i] > done) {
          next = std::min(next, points[i]);
          break;
        }
      }
    }
    if (next == std::numeric_limits<int>::max())
      return;
    add_stack_layers(done, next, run, windowed != nullptr ? &windowed_run : nullptr, window,
                     totals);
    totals.masked_flops += masked_flops(done, next, run.features(), masked,
                                        windowed != nullptr ? &windowed_masked : nullptr, window);
    done = next;
  }
}

namespace {

// state_copy's K/V-only layers and batch_sync's masked layers of an entry that otherwise runs
// layers 1..depth plainly. False when the delta slots are full.
[[gnu::always_inline]] inline bool add_side_work(const BatchEntry& e, int depth, int stacked_depth,
                                                 Changes& changes) {
  // Straight into the slots: a temporary WorkCounts written field by field and read back as
  // vectors stalls store forwarding.
  const int kv_end = std::min(e.kv_only_depth, stacked_depth);
  if (kv_end > depth) {
    DeltaSlot* from = changes.deltas.find(depth);
    DeltaSlot* to = changes.deltas.find(kv_end);
    if (from == nullptr || to == nullptr)
      return false;
    from->run.kv_only_tokens += e.query_tokens;
    to->run.kv_only_tokens -= e.query_tokens;
  }
  const int useful = std::max(e.useful_depth, 0);
  if (useful < depth) {
    DeltaSlot* from = changes.deltas.find(useful);
    DeltaSlot* to = changes.deltas.find(depth);
    if (from == nullptr || to == nullptr)
      return false;
    from->masked.add_queries(e.query_tokens, e.context_tokens, 1);
    to->masked.add_queries(e.query_tokens, e.context_tokens, -1);
  }
  return true;
}

// Any entry, as the changes of its work at each of its breakpoints. False when the delta slots
// are full.
bool add_entry_work(const StackLayout& layout, const BatchEntry& e, Changes& changes) {
  const EntrySpan s = layout.span_of(e);
  StackLayout::Breakpoints points;
  const std::size_t n = layout.breakpoints(e, s, points);
  const bool any_masked = s.useful < s.depth;
  WorkCounts run_before{};
  WorkCounts masked_before{};
  for (std::size_t i = 0; i < n; ++i) {
    const int layer = points[i];
    const WorkCounts run = layout.work_at(e, s, layer);
    if (run != run_before && !add_delta(changes, layer, run, run_before, false))
      return false;
    run_before = run;
    if (any_masked) {
      const WorkCounts masked = layout.masked_at(e, s, layer);
      if (masked != masked_before && !add_delta(changes, layer, masked, masked_before, true))
        return false;
      masked_before = masked;
    }
  }
  return true;
}

// deferred_fill's usual entry: from layer 1, its queries alone below the layer its pending
// tokens join and with them from there to its depth; nothing else. The same changes as
// add_entry_work gives it (its breakpoints are 0, the join layer and the depth, and the work
// differs across each), in the same order, without sorting breakpoints.
bool fill_shape(const BatchEntry& e, int depth) {
  return e.start_depth <= 0 && e.pending_tokens > 0 && e.recursion_context_count == 0 &&
         e.coda == BatchEntry::Coda::from_start && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth && depth > 0;
}

bool add_fill_work(const BatchEntry& e, int depth, Changes& changes) {
  const int from = std::clamp(e.pending_from_depth, 0, depth);
  const WorkCounts none{};
  WorkCounts alone{};
  alone.add_queries(e.query_tokens, e.context_tokens);
  WorkCounts joined{};
  joined.add_queries(e.query_tokens + e.pending_tokens,
                     std::max<std::int64_t>(e.context_tokens - e.pending_tokens, 0));
  if (from == 0) {
    return add_delta(changes, 0, joined, none, false) &&
           add_delta(changes, depth, none, joined, false);
  }
  if (from == depth) {
    return add_delta(changes, 0, alone, none, false) &&
           add_delta(changes, depth, none, alone, false);
  }
  return add_delta(changes, 0, alone, none, false) &&
         add_delta(changes, from, joined, alone, false) &&
         add_delta(changes, depth, none, joined, false);
}

// Depth-wise batching's entry: its queries over the prelude (own context) and then recursion 1's
// layers (with recursion_context[0], its only override), or nothing in the stack at all (a token
// that waited for its coda and head). The same changes add_entry_work gives it, without
// breakpoints.
bool first_recursion_shape(const BatchEntry& e, int depth, const StackLayout& layout) {
  return e.recursion_context_count <= 1 && e.pending_tokens <= 0 && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth &&
         (depth <= layout.first_recursion_end() || e.start_depth >= depth);
}

bool add_first_recursion_work(const BatchEntry& e, int depth, const StackLayout& layout,
                              Changes& changes) {
  const int start = std::clamp(e.start_depth, 0, depth);
  if (start >= depth)
    return true;
  const int begin = std::clamp(layout.first_recursion_begin(), start, depth);
  const WorkCounts none{};
  WorkCounts own{};
  own.add_queries(e.query_tokens, e.context_tokens);
  WorkCounts recursion{};
  recursion.add_queries(e.query_tokens,
                        e.recursion_context_count == 1 ? e.recursion_context[0] : e.context_tokens);
  if (begin == start)
    return add_delta(changes, start, recursion, none, false) &&
           add_delta(changes, depth, none, recursion, false);
  if (begin == depth)
    return add_delta(changes, start, own, none, false) &&
           add_delta(changes, depth, none, own, false);
  return add_delta(changes, start, own, none, false) &&
         add_delta(changes, begin, recursion, own, false) &&
         add_delta(changes, depth, none, recursion, false);
}

// skip_kv's entry: its queries from layer 1 to its depth, each recursion's layers with that
// recursion's context (recursion_context), nothing else. The same changes add_entry_work gives it
// (its breakpoints are 0, the starts of the recursions and the depth, with a change wherever the
// work differs), in the same order, without sorting breakpoints.
bool recursion_contexts_shape(const BatchEntry& e, int depth) {
  return e.start_depth <= 0 && e.pending_tokens <= 0 && e.recursion_context_count > 0 &&
         e.coda == BatchEntry::Coda::from_start && !e.reuse_first_recursion_kv &&
         e.kv_only_depth <= depth && e.useful_depth >= depth && depth > 0;
}

bool add_recursion_contexts_work(const StackLayout& layout, const BatchEntry& e, int depth,
                                 Changes& changes) {
  const int overrides = recursion_context_overrides(e);
  const auto work_of = [&](int recursion) {
    WorkCounts w{};
    w.add_queries(e.query_tokens, recursion >= 1 && recursion <= overrides
                                      ? e.recursion_context[static_cast<std::size_t>(recursion - 1)]
                                      : e.context_tokens);
    return w;
  };
  const WorkCounts none{};
  WorkCounts before = work_of(layout.recursion_of_layer(0));
  if (!add_delta(changes, 0, before, none, false))
    return false;
  for (int r = 1; r <= layout.recursions(); ++r) {
    const int begin = layout.recursion_begin(r);
    if (begin <= 0)
      continue;  // recursion 1 from layer 0 (no prelude): counted above
    if (begin >= depth)
      break;
    const WorkCounts w = work_of(r);
    if (w != before) {
      if (!add_delta(changes, begin, w, before, false))
        return false;
      before = w;
    }
  }
  return add_delta(changes, depth, none, before, false);
}

// Work other than plain runs from layer 1, gathered during the pass over the batch.
struct OtherWork {
  Changes changes;
  WorkCounts coda_extra{};  // entries off the plain path that still run the coda
};

// Kept out of line so that the per-entry loop over plain entries stays small. False when the
// delta slots are full.
[[gnu::noinline]] bool add_other_work(const StackLayout& layout, const BatchEntry& e, bool plain,
                                      int depth, OtherWork& other) {
  if (plain)
    return add_side_work(e, depth, layout.stacked_depth(), other.changes);
  if (runs_coda(e))
    other.coda_extra.add(e);
  if (fill_shape(e, depth))
    return add_fill_work(e, depth, other.changes);
  if (first_recursion_shape(e, depth, layout))
    return add_first_recursion_work(e, depth, layout, other.changes);
  if (recursion_contexts_shape(e, depth))
    return add_recursion_contexts_work(layout, e, depth, other.changes);
  return add_entry_work(layout, e, other.changes);
}

}  // namespace

IterationCost RooflineCostModel::iteration_cost(std::span<const BatchEntry> batch) const {
  if (stages_.size() > 1)
    return pipeline_cost(batch);
  GraphTotals totals;
  price_window(batch, {0, stacked_depth_ + coda_layers_, true}, totals);
  if (counts_only_ && counts_regroup_exactly_ && !(totals.flops < 0x1p53)) {
    // Past 2^53 FLOPs are no longer integer sums: counted op by op, as a roofline model would.
    totals = GraphTotals{};
    totals.ordered = true;
    price_window(batch, {0, stacked_depth_ + coda_layers_, true}, totals);
  }
  if (counts_only_) {
    IterationCost counted;
    counted.flops = totals.flops;
    counted.bytes = totals.bytes;
    counted.masked_flops = totals.masked_flops;
    return counted;
  }
  return to_cost(totals);
}

RooflineCostModel RooflineCostModel::counting(const ModelShape& model, ParallelSpec parallel) {
  RooflineCostModel counter(model, counting_hardware(model, parallel), RooflineEfficiency{1.0, 1.0},
                            parallel);
  counter.counts_only_ = true;
  // A collective's terms are link bytes, not counted work: a counter holds none (it is one
  // GPU's), and the launch classes could not tell them apart.
  const auto integer_flops = [](const OpParams& op) {
    if (op.collective || op.expert_imbalance != 0 || op.routed_weight_bytes != 0)
      return false;
    for (std::size_t i = 0; i < op.used_terms; ++i) {
      if (!std::isfinite(op.terms[i].flops) || std::floor(op.terms[i].flops) != op.terms[i].flops)
        return false;
    }
    return true;
  };
  counter.counts_regroup_exactly_ =
      counter.stages_.size() <= 1 && counter.probe_points_.empty() &&
      std::all_of(counter.layer_params_.begin(), counter.layer_params_.end(), integer_flops) &&
      std::all_of(counter.kv_params_.begin(), counter.kv_params_.end(), integer_flops) &&
      std::all_of(counter.head_params_.begin(), counter.head_params_.end(), integer_flops);
  if (counter.counts_regroup_exactly_) {
    const auto ops = static_cast<std::size_t>(counter.layer_graph_.size());
    for (std::size_t v = 0; v < static_cast<std::size_t>(counter.variants_); ++v) {
      counter.layer_linear_.push_back(
          linear_counts(std::span<const OpParams>(&counter.layer_params_[v * ops], ops)));
    }
    counter.head_linear_ = linear_counts(counter.head_params_);
  }
  return counter;
}

RooflineCostModel::LinearCounts RooflineCostModel::linear_counts(std::span<const OpParams> params) {
  LinearCounts classes;
  for (const OpParams& op : params) {
    const std::size_t launch = at(op.launch_if);
    auto c = std::find_if(classes.begin(), classes.end(),
                          [&](const LaunchClass& k) { return k.launch == launch; });
    if (c == classes.end()) {
      classes.push_back(LaunchClass{});
      c = std::prev(classes.end());
      c->launch = launch;
    }
    c->fixed_bytes += op.fixed_bytes;
    for (std::size_t i = 0; i < op.used_terms; ++i) {
      const auto feature = static_cast<std::uint8_t>(at(op.terms[i].feature));
      std::size_t t = 0;
      while (t < c->terms && c->feature[t] != feature)
        ++t;
      if (t == c->terms)
        c->feature[c->terms++] = feature;
      c->flops[t] += op.terms[i].flops;
      c->bytes[t] += op.terms[i].bytes;
    }
  }
  return classes;
}

[[gnu::always_inline]] inline void RooflineCostModel::price_window(
    std::span<const BatchEntry> batch, const LayerWindow& window, GraphTotals& totals) const {
  SlotTable<DepthSlot> ends;
  OtherWork other;
  // Adds a run of plain entries at one depth to its slot; false when the slots are full.
  // Inlined, so that the run's sums go from registers to the slot (a call would store them to
  // memory, and the slot's vector loads of them stall on store forwarding). GNU syntax: C++20 has
  // no place for a standard attribute that applies to a lambda's call operator.
  const auto flush = [&](int depth, const PlainRun& run) __attribute__((always_inline)) {
    DepthSlot* slot = ends.find(depth);
    if (slot == nullptr)
      return false;
    slot->counts.add(run.counts());
    slot->kv_to_top += run.kv_to_top;
    return true;
  };

  // One pass: plain entries summed per distinct depth (few: the exit points), consecutive ones at
  // one depth in registers and stored once; the rest as changes at their boundaries.
  PlainRun run{};
  int run_depth = -1;
  std::int64_t emitting = 0;
  // A model with windowed layers takes the exact sweep, which counts their keys per group of
  // layers; the one pass below sums whole contexts only.
  bool overflow = !window_.none();
  for (const BatchEntry& e : overflow ? std::span<const BatchEntry>() : batch) {
    if (e.query_tokens <= 0)
      continue;
    emitting += e.emits_token ? 1 : 0;
    const int depth = clamp_depth(e.depth);
    const bool plain = plain_run(e);
    if (plain) {
      if (depth != run_depth) {
        if (run_depth >= 0 && !flush(run_depth, run)) {
          overflow = true;
          break;
        }
        run = PlainRun{};
        run_depth = depth;
      }
      run.add(e);
    }
    const bool side = plain && (e.kv_only_depth > depth || e.useful_depth < depth);
    if (side) {
      // K/V-only layers up to the top, nothing masked: counted with the entry's depth, not as
      // changes of their own (the top ends every group).
      if (e.kv_only_depth >= stacked_depth_ && depth < stacked_depth_ && e.useful_depth >= depth) {
        run.kv_to_top += e.query_tokens;
      } else if (!add_side_work(e, depth, stacked_depth_, other.changes)) {
        overflow = true;
        break;
      }
    }
    if (!plain && !add_other_work(layout_, e, plain, depth, other)) {
      overflow = true;
      break;
    }
  }
  if (!overflow && run_depth >= 0 && !flush(run_depth, run))
    overflow = true;
  SlotTable<DeltaSlot>& deltas = other.changes.deltas;
  const WorkCounts& coda_extra = other.coda_extra;

  WorkCounts all{};
  if (!overflow) {
    ends.sort();
    deltas.sort();
    // Walk the boundaries upwards. The batch of a group of layers is every plain entry deeper
    // than the group's start plus the changes below it; integer sums make this exact.
    WorkCounts running{};
    for (std::size_t i = 0; i < ends.used; ++i)
      running.add(ends.sorted(i).counts);
    all = running;
    all.add(coda_extra);
    running.add(other.changes.at_first_layer);
    // Time changes only where the batch does; masked FLOPs also where its masked part does.
    WorkCounts masked{};
    std::size_t i = 0;
    std::size_t j = 0;
    int group_start = 0;
    int masked_start = 0;
    const WorkCounts no_change{};
    while (i < ends.used || j < deltas.used) {
      const int at_end = i < ends.used ? ends.sorted(i).depth : std::numeric_limits<int>::max();
      const int at_delta =
          j < deltas.used ? deltas.sorted(j).depth : std::numeric_limits<int>::max();
      const int boundary = std::min(at_end, at_delta);
      const bool run_changes =
          at_end == boundary || (at_delta == boundary && deltas.sorted(j).run != no_change);
      if (boundary > masked_start) {
        if (masked.tokens > 0)
          totals.masked_flops +=
              masked_flops(masked_start, boundary, running.features(), masked, nullptr, window);
        masked_start = boundary;
      }
      if (run_changes && boundary > group_start) {
        add_stack_layers(group_start, boundary, running, nullptr, window, totals);
        group_start = boundary;
      }
      if (at_end == boundary) {
        running.subtract(ends.sorted(i).counts);
        running.kv_only_tokens += ends.sorted(i++).kv_to_top;
      }
      if (at_delta == boundary) {
        running.add(deltas.sorted(j).run);
        masked.add(deltas.sorted(j++).masked);
      }
    }
    // The K/V-only tokens counted with their depths run to the top (every change of the batch
    // is behind the walk, so they are all that is left), ending the stack when no boundary did.
    if (running.kv_only_tokens > 0 && group_start < stacked_depth_)
      add_stack_layers(group_start, stacked_depth_, running, nullptr, window, totals);
  } else {
    add_stack_by_sweep(batch, window, totals);
    emitting = 0;
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      if (runs_coda(e))
        all.add(e);
      emitting += e.emits_token ? 1 : 0;
    }
  }
  add_coda_and_head(all, emitting, window, totals);
  if (!probe_points_.empty())
    add_probes(batch, window, totals);
}

void RooflineCostModel::add_coda_and_head(const WorkCounts& all, std::int64_t emitting,
                                          const LayerWindow& window, GraphTotals& totals) const {
  // Coda layers run for every token that started at layer 1, whatever its depth (later tokens
  // attend over their K/V), or that says so (depth-wise batching).
  BatchFeatures all_x = all.features();
  const int coda_layers =
      std::min(window.last, stacked_depth_ + coda_layers_) - std::max(window.first, stacked_depth_);
  if (coda_layers > 0 && all.tokens > 0)
    add_graph(layer_graph_, layer_params_.data(), token_prices_.data(), all_x, coda_layers, totals);
  if (window.head) {
    if (!counts_only_ && all.tokens == emitting &&
        static_cast<std::uint64_t>(emitting) < head_prices_.size()) {
      totals.add(head_prices_[static_cast<std::size_t>(emitting)]);
      return;
    }
    all_x[at(BatchFeature::emitting)] = as_double(emitting);
    add_graph(head_graph_, head_params_.data(), nullptr, all_x, 1, totals);
  }
}

void RooflineCostModel::count_stack_layers(int first, int last, const WorkCounts& run,
                                           IterationCost& counts) const {
  GraphTotals totals;
  // Measured cost models price no model with windowed layers (make_cost_model): `run` is what
  // every layer sees.
  add_stack_layers(first, last, run, nullptr, {0, stacked_depth_ + coda_layers_, true}, totals);
  counts.flops += totals.flops;
  counts.bytes += totals.bytes;
}

void RooflineCostModel::count_coda_and_head(const WorkCounts& all, std::int64_t emitting,
                                            IterationCost& counts) const {
  GraphTotals totals;
  add_coda_and_head(all, emitting, {0, stacked_depth_ + coda_layers_, true}, totals);
  counts.flops += totals.flops;
  counts.bytes += totals.bytes;
}

std::int64_t RooflineCostModel::probed_at(std::span<const BatchEntry> batch, int point,
                                          int stacked_depth) {
  std::int64_t probed = 0;
  for (const BatchEntry& e : batch) {
    // A decode token that ran the layer below the point and was still deciding: it exits there
    // or goes on. A batch_sync rider (past its useful depth) has exited already.
    const int depth = std::min(std::min(e.depth, stacked_depth), std::max(e.useful_depth, 0));
    probed += e.query_tokens == 1 && std::max(e.start_depth, 0) < point && point <= depth ? 1 : 0;
  }
  return probed;
}

void RooflineCostModel::add_probes(std::span<const BatchEntry> batch, const LayerWindow& window,
                                   GraphTotals& totals) const {
  for (const int point : probe_points_) {
    // The probe follows layer `point` (1-based): on the stage that runs it.
    if (point - 1 < window.first || point - 1 >= window.last)
      continue;
    const std::int64_t probed = probed_at(batch, point, stacked_depth_);
    if (probed == 0)
      continue;
    BatchFeatures x{};
    x[at(BatchFeature::tokens)] = as_double(probed);
    add_graph(probe_graph_, probe_params_.data(), nullptr, x, 1, totals);
  }
}

IterationCost RooflineCostModel::pipeline_cost(std::span<const BatchEntry> batch) const {
  // Micro-batches as vLLM's virtual engines form them (micro_batches.hpp), grouped in a scratch
  // buffer per thread, so that steady state allocates nothing.
  const std::size_t n_stages = stages_.size();
  thread_local MicroBatches micro_batches;
  micro_batches.split(batch, n_stages);
  const std::size_t micro = micro_batches.count();
  if (micro == 0) {
    GraphTotals none;
    price_window(batch, {0, stacked_depth_ + coda_layers_, true}, none);
    return to_cost(none);
  }
  const std::vector<std::int64_t>& tokens = micro_batches.tokens;

  // The cycle: a stage runs every micro-batch once per step; a micro-batch runs every stage and
  // hand-off once per step, waiting for its sampled tokens before its next step.
  GraphTotals all;
  GraphTotals busiest;
  GraphTotals longest_trip;
  std::array<GraphTotals, k_max_pipeline_stages> per_stage{};
  for (std::size_t m = 0; m < micro; ++m) {
    const std::span<const BatchEntry> part = micro_batches.part(m);
    GraphTotals trip;
    for (std::size_t s = 0; s < n_stages; ++s) {
      GraphTotals stage;
      price_window(part, stages_[s], stage);
      per_stage[s].add(stage);
      trip.add(stage);
      if (s + 1 < n_stages) {
        const double link_ns = hand_off_ns(s, as_double(tokens[m]));
        trip.total += link_ns;
        trip.communication += link_ns - launch_ns_;
        trip.overhead += launch_ns_;
      }
    }
    all.add(trip);
    if (trip.total > longest_trip.total)
      longest_trip = trip;
  }
  for (std::size_t s = 0; s < n_stages; ++s) {
    if (per_stage[s].total > busiest.total)
      busiest = per_stage[s];
  }
  GraphTotals step = busiest.total >= longest_trip.total ? busiest : longest_trip;
  // Executed work is everything every stage ran, whatever the critical path.
  step.flops = all.flops;
  step.bytes = all.bytes;
  step.masked_flops = all.masked_flops;
  return to_cost(step);
}

namespace {

// An iteration priced past k_max_iteration_us: the hardware keys (or efficiencies) make every
// step take days, and its rounding to int64 nanoseconds would wrap.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_iteration_price(double total_ns, double flops,
                                                                   double bytes) {
  throw InputError(
      {"", 0, 0, "hardware"},
      expected_found(fmt::format("iteration prices under {:g} us", k_max_iteration_us),
                     fmt::format("{:.4g} us for an iteration of {:.4g} FLOPs and {:.4g} bytes: "
                                 "hardware.peak_tflops, hardware.memory_bandwidth_gbps or "
                                 "cost_model.*_efficiency is far too small",
                                 total_ns / static_cast<double>(k_ns_per_us), flops, bytes)));
}

}  // namespace

[[gnu::always_inline]] inline IterationCost RooflineCostModel::to_cost(const GraphTotals& totals) {
  if (!(totals.total <= k_max_iteration_us * static_cast<double>(k_ns_per_us))) [[unlikely]]
    refuse_iteration_price(totals.total, totals.flops, totals.bytes);
  IterationCost cost;
  cost.total = std::llround(totals.total);
  cost.overhead = std::llround(totals.overhead);
  cost.compute_bound = std::llround(totals.compute);
  cost.communication = std::llround(totals.communication);
  cost.memory_bound = cost.total - cost.compute_bound - cost.communication - cost.overhead;
  if (cost.memory_bound < 0) {  // rounding when nothing on the path is memory-bound
    cost.compute_bound += cost.memory_bound;
    cost.memory_bound = 0;
  }
  cost.flops = totals.flops;
  cost.bytes = totals.bytes;
  cost.masked_flops = totals.masked_flops;
  return cost;
}

std::string_view to_string(PriceBound bound) {
  switch (bound) {
    case PriceBound::none:
      return "none";
    case PriceBound::compute:
      return "compute";
    case PriceBound::memory:
      return "memory";
    case PriceBound::kernel_floor:
      return "kernel floor";
    case PriceBound::attention_floor:
      return "attention floor";
    case PriceBound::collective:
      return "collective";
  }
  return "none";
}

OpCost RooflineCostModel::describe(OpKind kind, int layer, const OpParams& params,
                                   const BatchFeatures& x, const BatchFeatures& masked) const {
  const Priced p = price(params, x);
  OpCost op;
  op.kind = kind;
  op.layer = layer;
  op.launched = p.launched;
  op.compute_bound = p.compute_bound;
  op.communication = p.communication;
  op.duration_ns = p.duration_ns;
  op.flops = p.flops;
  op.bytes = p.bytes;
  op.masked_flops = p.launched ? flops_of(params, masked) : 0.0;
  if (!p.launched)
    return op;
  op.launch_ns = launch_ns_;
  if (p.communication) {
    // Its latency or its bytes, whichever is more of its time.
    const double latency_share = params.fixed_ns / p.body_ns;
    op.bound = PriceBound::collective;
    op.parameter = latency_share > 0.5 ? params.fixed_parameter : params.memory_parameter;
    return op;
  }
  const double compute_ns = p.flops * params.ns_per_flop;
  const double memory_ns = p.bytes * params.ns_per_byte;
  const double roof_ns = std::max(compute_ns, memory_ns);
  if (p.body_ns - roof_ns > roof_ns) {
    // More of its time is the kernel's fixed and per-unit time than its FLOPs or bytes.
    op.bound = params.fixed_bound;
    op.parameter = params.fixed_parameter;
  } else if (p.compute_bound) {
    op.bound = PriceBound::compute;
    op.parameter = params.compute_parameter;
  } else {
    op.bound = PriceBound::memory;
    op.parameter = params.memory_parameter;
  }
  return op;
}

OpCost RooflineCostModel::op_cost(OpKind kind, const BatchFeatures& x) const {
  const BatchFeatures none{};
  if (kind == OpKind::kv_projection)
    return describe(kind, -1, kv_params_.front(), x, none);
  const auto find = [&](const OpGraph& graph,
                        const std::vector<OpParams>& params) -> const OpParams* {
    for (int v = 0; v < graph.size(); ++v) {
      if (graph.op(v).kind == kind)
        return &params[static_cast<std::size_t>(v)];
    }
    return nullptr;
  };
  const OpParams* params = find(layer_graph_, layer_params_);  // variant 0 first: no LoRA
  if (params == nullptr)
    params = find(head_graph_, head_params_);
  if (params == nullptr)
    params = find(probe_graph_, probe_params_);
  if (params == nullptr)
    throw std::logic_error("RooflineCostModel::op_cost: no such op in this model's graphs");
  return describe(kind, -1, *params, x, none);
}

double RooflineCostModel::hand_off_ns(std::size_t stage, double tokens) const {
  return tokens * hand_off_ns_per_token_[stage] + hand_off_fixed_ns_[stage];
}

std::vector<OpCost> RooflineCostModel::op_breakdown(std::span<const BatchEntry> batch) const {
  std::vector<OpCost> ops;
  const auto emit_graph = [&](const OpGraph& graph, const OpParams* params, const BatchFeatures& x,
                              const BatchFeatures& masked, int layer) {
    for (int v = 0; v < graph.size(); ++v)
      ops.push_back(describe(graph.op(v).kind, layer, params[v], x, masked));
  };
  WorkCounts all{};
  double emitting = 0;
  for (const BatchEntry& e : batch) {
    if (e.query_tokens <= 0)
      continue;
    if (runs_coda(e))
      all.add(e);
    if (e.emits_token)
      emitting += 1;
  }
  const BatchFeatures none{};
  const auto n_ops = static_cast<std::size_t>(layer_graph_.size());
  for (int l = 0; l < stacked_depth_; ++l) {
    const std::size_t variant = variant_of_layer(l);
    const AttentionWindow* windowed = windowed_[variant] != 0 ? &window_ : nullptr;
    WorkCounts reached{};
    WorkCounts masked{};
    for (const BatchEntry& e : batch) {
      if (e.query_tokens <= 0)
        continue;
      const EntrySpan s = layout_.span_of(e);
      reached.add(layout_.work_at(e, s, l, windowed));
      masked.add(layout_.masked_at(e, s, l, windowed));
    }
    const BatchFeatures x = reached.features();
    emit_graph(layer_graph_, &layer_params_[variant * n_ops], x, masked.features(), l);
    ops.push_back(describe(OpKind::kv_projection, l, kv_params_[variant], x, none));
  }
  for (const int point : probe_points_) {
    BatchFeatures x{};
    x[at(BatchFeature::tokens)] = as_double(probed_at(batch, point, stacked_depth_));
    emit_graph(probe_graph_, probe_params_.data(), x, none, point - 1);
  }
  BatchFeatures all_x = all.features();
  for (int l = 0; l < coda_layers_; ++l) {
    emit_graph(layer_graph_, layer_params_.data(), all_x, none, stacked_depth_ + l);
  }
  all_x[at(BatchFeature::emitting)] = emitting;
  emit_graph(head_graph_, head_params_.data(), all_x, none, -1);
  return ops;
}

}  // namespace exitsim::sim
