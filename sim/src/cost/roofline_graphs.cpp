// The roofline's op graphs (one layer, the head, an exit probe) and the collectives' params
// (roofline_ops.hpp).
#include <stdexcept>

#include "roofline_ops.hpp"

namespace exitsim::sim::roofline_ops {
namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

OpParams collective_op(OpKind kind, const ModelShape& model, const TensorShard& shard) {
  const double p = shard.degree;
  const double dtype_bytes = as_double(bytes_per_element(model.dtype));
  OpParams params;
  params.collective = true;
  switch (kind) {
    case OpKind::tp_all_reduce:
      // Reduce-scatter then all-gather around the ring: each GPU sends 2(p-1)/p of the
      // activations (tokens x d_model), NCCL's "bus bytes".
      params.add(BatchFeature::tokens, 0, 2 * (p - 1) / p * as_double(model.d_model) * dtype_bytes);
      return params;
    case OpKind::probe_reduce:
      // Each probed token's four shard statistics (fp32), combined across the group by a ring
      // all-reduce.
      params.add(BatchFeature::tokens, 0, 2 * (p - 1) / p * 4 * 4);
      return params;
    case OpKind::logits_gather:
      // The p vocabulary shards of each emitting token's logits to one GPU: (p-1)/p of the row
      // arrives there.
      params.add(BatchFeature::emitting, 0, (p - 1) / p * as_double(model.vocab) * dtype_bytes);
      params.launch_if = BatchFeature::emitting;
      return params;
    default:
      break;
  }
  throw std::logic_error("collective_op: not a collective");
}

// The two attention kernels depend only on the QKV projection (they serve disjoint sequences);
// sharing stream 0 serialises them, as in engines that launch both.
OpGraph build_layer_graph(bool tensor_parallel, bool mixture_of_experts) {
  OpGraph g;
  const int in_norm = g.add_op(OpKind::input_norm);
  const int qkv = g.add_op(OpKind::qkv_projection);
  const int prefill = g.add_op(OpKind::attention_prefill);
  const int decode = g.add_op(OpKind::attention_decode);
  const int out = g.add_op(OpKind::output_projection);
  const int post_norm = g.add_op(OpKind::post_attention_norm);
  const int router = mixture_of_experts ? g.add_op(OpKind::moe_router) : -1;
  const int gate_up = g.add_op(OpKind::mlp_gate_up);
  const int act = g.add_op(OpKind::mlp_activation);
  const int down = g.add_op(OpKind::mlp_down);
  g.add_dependency(in_norm, qkv);
  g.add_dependency(qkv, prefill);
  g.add_dependency(qkv, decode);
  g.add_dependency(prefill, out);
  g.add_dependency(decode, out);
  if (router >= 0) {
    g.add_dependency(post_norm, router);
    g.add_dependency(router, gate_up);
  } else {
    g.add_dependency(post_norm, gate_up);
  }
  g.add_dependency(gate_up, act);
  g.add_dependency(act, down);
  if (tensor_parallel) {
    // The row-parallel GEMMs leave partial sums: the residual add (in the next norm) waits for
    // their all-reduce. The MLP's feeds the next layer, so the layer ends with it.
    const int attention_sum = g.add_op(OpKind::tp_all_reduce, 1);
    g.add_dependency(out, attention_sum);
    g.add_dependency(attention_sum, post_norm);
    const int mlp_sum = g.add_op(OpKind::tp_all_reduce, 1);
    g.add_dependency(down, mlp_sum);
  } else {
    g.add_dependency(out, post_norm);
  }
  g.finalize();
  return g;
}

OpGraph build_probe_graph(bool tensor_parallel) {
  OpGraph g;
  const int norm_op = g.add_op(OpKind::probe_norm);
  const int head = g.add_op(OpKind::probe_head);
  const int stats = g.add_op(OpKind::probe_softmax);
  g.add_dependency(norm_op, head);
  g.add_dependency(head, stats);
  if (tensor_parallel) {
    const int reduce = g.add_op(OpKind::probe_reduce, 1);
    g.add_dependency(stats, reduce);
  }
  g.finalize();
  return g;
}

OpGraph build_head_graph(bool tensor_parallel) {
  OpGraph g;
  const int norm_op = g.add_op(OpKind::final_norm);
  const int head = g.add_op(OpKind::lm_head);
  const int sample = g.add_op(OpKind::sampling);
  g.add_dependency(norm_op, head);
  if (tensor_parallel) {
    const int gather = g.add_op(OpKind::logits_gather, 1);
    g.add_dependency(head, gather);
    g.add_dependency(gather, sample);
  } else {
    g.add_dependency(head, sample);
  }
  g.finalize();
  return g;
}

}  // namespace exitsim::sim::roofline_ops
