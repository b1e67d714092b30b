// The roofline's op-by-op view: every op of the unrolled iteration priced one layer at a time,
// straight from the entries (op_breakdown, the reference the fast path is tested against), and
// one op alone (op_cost).
#include <string_view>
#include <vector>

#include "exitsim/sim/cost/roofline.hpp"
#include "roofline_price.hpp"

namespace exitsim::sim {

using roofline_price::as_double;
using roofline_price::at;
using roofline_price::flops_of;

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
  // The timing scope's layers only (block_only: from the first layer of the block).
  for (int l = scope_window_.first; l < stacked_depth_; ++l) {
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
  if (!scope_window_.head)
    return ops;  // block_only: no coda, no head
  BatchFeatures all_x = all.features();
  for (int l = 0; l < coda_layers_; ++l) {
    emit_graph(layer_graph_, layer_params_.data(), all_x, none, stacked_depth_ + l);
  }
  all_x[at(BatchFeature::emitting)] = emitting;
  emit_graph(head_graph_, head_params_.data(), all_x, none, -1);
  return ops;
}

}  // namespace exitsim::sim
