// The roofline's construction: its inputs checked, the pipeline stages and hand-offs, every op's
// params per layer variant, and the counting model.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/core/model_validation.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "op_rates.hpp"
#include "roofline_ops.hpp"
#include "roofline_price.hpp"

namespace exitsim::sim {

using roofline_price::as_double;
using roofline_price::k_max_graph_ops;

namespace {

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
                                     bool exit_probes, TimingScope scope)
    : scope_(scope),
      layer_graph_(roofline_ops::build_layer_graph(parallel.tensor > 1, model.is_moe())),
      head_graph_(roofline_ops::build_head_graph(parallel.tensor > 1)),
      probe_graph_(roofline_ops::build_probe_graph(parallel.tensor > 1)) {
  check_inputs(model, hardware, efficiency, parallel);
  launch_ns_ = as_double(hardware.launch_overhead);
  ridge_exponent_ = hardware.kernels.ridge_exponent;
  layout_ = StackLayout(model.depth);
  stacked_depth_ = model.depth.stacked_depth();
  coda_layers_ = model.depth.coda_layers;
  scope_window_ = scope == TimingScope::block_only
                      ? LayerWindow{block_only_first_layer(model.depth), stacked_depth_, false}
                      : LayerWindow{0, stacked_depth_ + coda_layers_, true};
  build_stages(model, hardware, efficiency, parallel);
  // A block-only timing holds no exit probe: each is an LM head call.
  build_params(model, hardware, efficiency, parallel,
               exit_probes && scope == TimingScope::whole_step);
  build_price_cache();
}

std::vector<std::string> RooflineCostModel::notes() const {
  if (scope_ == TimingScope::whole_step)
    return {};
  return {timing_scope_note(scope_, "roofline")};
}

void RooflineCostModel::check_inputs(const ModelShape& model, const HardwareSpec& hardware,
                                     const RooflineEfficiency& efficiency,
                                     const ParallelSpec& parallel) const {
  if (const auto problem = find_shape_problem(model)) {
    throw InputError({"", 0, 0, "model." + problem->field}, problem->message);
  }
  if (const auto problem = find_parallel_problem(model, parallel, hardware)) {
    throw InputError({"", 0, 0, "parallel." + problem->field}, problem->message);
  }
  if (const auto problem = find_link_problem(parallel, hardware)) {
    throw InputError({"", 0, 0, problem->field}, problem->message);
  }
  check_fraction(efficiency.flops, "cost_model.flops_efficiency");
  check_fraction(efficiency.bandwidth, "cost_model.bandwidth_efficiency");
  if (!(hardware.peak_flops_for(model.dtype) > 0)) {
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
}

void RooflineCostModel::build_stages(const ModelShape& model, const HardwareSpec& hardware,
                                     const RooflineEfficiency& efficiency,
                                     const ParallelSpec& parallel) {
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
}

void RooflineCostModel::build_params(const ModelShape& model, const HardwareSpec& hardware,
                                     const RooflineEfficiency& efficiency,
                                     const ParallelSpec& parallel, bool exit_probes) {
  const TensorShard shard = TensorShard::of(model, parallel);
  const OpRates rates(hardware, hardware.peak_flops_for(model.dtype), efficiency,
                      parallel.tensor > 1);
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
  const auto row = static_cast<std::size_t>(stacked_depth_) + 1;
  variant_prefix_.assign(static_cast<std::size_t>(variants_) * row, 0);
  for (std::size_t v = 0; v < static_cast<std::size_t>(variants_); ++v) {
    for (std::size_t l = 0; l + 1 < row; ++l) {
      const int here = variant_of_layer[l] == static_cast<int>(v) ? 1 : 0;
      variant_prefix_[v * row + l + 1] = variant_prefix_[v * row + l] + here;
    }
  }
}

RooflineCostModel RooflineCostModel::counting(const ModelShape& model, ParallelSpec parallel,
                                              TimingScope scope) {
  RooflineCostModel counter(model, counting_hardware(model, parallel), RooflineEfficiency{1.0, 1.0},
                            parallel, false, scope);
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

}  // namespace exitsim::sim
