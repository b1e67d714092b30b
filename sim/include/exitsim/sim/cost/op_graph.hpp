#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace exitsim::sim {

// The kernels of one iteration, as a cost model prices them.
enum class OpKind : std::uint8_t {
  input_norm,           // fused residual add + RMSNorm before attention
  qkv_projection,       // one GEMM producing Q, K and V
  kv_projection,        // K and V only, of hidden states copied at an exit (state_copy)
  attention_prefill,    // causal attention of prefill chunks (its own kernel in real engines)
  attention_decode,     // paged attention of decode tokens
  output_projection,    // attention output GEMM
  post_attention_norm,  // fused residual add + RMSNorm before the MLP
  moe_router,           // mixture of experts: the router GEMM (d_model x experts) and its top-k
  mlp_gate_up,          // gate and up as one GEMM (gated MLP), or up only (plain MLP); of a
                        // mixture, every token's top-k experts in one grouped GEMM
  mlp_activation,       // SiLU(gate) * up, or GELU(up)
  mlp_down,             // down projection GEMM
  final_norm,
  lm_head,  // logits of the tokens that emit
  sampling,
  // Tensor parallelism's collectives, on their own stream (docs/cost_model.md, "Tensor
  // parallelism"): the all-reduce of a layer's partial sums after the attention output
  // projection and after the MLP's down projection, and the gather of the vocab-parallel LM
  // head's logits to the GPU that samples.
  tp_all_reduce,
  logits_gather,
  // The confidence probe at an exit point (exit_policy.kind confidence; docs/cost_model.md,
  // "Exit probes"): the tokens still running there go through the final norm, the LM head and
  // the softmax statistics their confidence needs (top-1, top-2, max and sum); under TP each GPU
  // has a vocabulary shard's statistics, which an all-reduce combines.
  probe_norm,
  probe_head,
  probe_softmax,
  probe_reduce,
  // A measured op no simulator op stands for (rotary, K/V writes, embedding, routers, probes,
  // compaction): in graphs built from op traces only; cost models never price it.
  host_op,
};

std::string_view to_string(OpKind kind);

struct OpNode {
  OpKind kind = OpKind::input_norm;
  int stream = 0;
};

// Result of a longest-path evaluation: its length and the op it ends at (-1 for an empty graph).
struct PathEnd {
  double length = 0;
  int sink = -1;
};

// A DAG of ops. Edges are data dependencies; each op also runs on a stream, and ops on one stream
// run one after another in the order they were added (a CUDA stream is a FIFO), so finalize()
// adds those stream-order edges too. The topological order is computed once, in finalize(); the
// longest path is then evaluated per iteration over that order with caller-owned scratch, so it
// allocates nothing.
class OpGraph {
 public:
  // Returns the op's id (ids are dense, in insertion order).
  int add_op(OpKind kind, int stream = 0);
  // `after` consumes what `before` produces.
  void add_dependency(int before, int after);
  // Adds stream-order edges, sorts topologically and builds the predecessor lists. Throws
  // std::logic_error when the dependencies contradict each other or the stream order (a cycle).
  void finalize();

  int size() const { return static_cast<int>(ops_.size()); }
  const OpNode& op(int id) const { return ops_[static_cast<std::size_t>(id)]; }
  // Every edge, data dependencies and stream order alike, as (before, after); after finalize().
  const std::vector<std::pair<int, int>>& edges() const { return edges_; }
  const std::vector<int>& topological_order() const { return order_; }
  // Every op on one stream: the stream order then chains all ops in insertion order (which is
  // the topological order). False for an empty graph; set by finalize().
  bool single_stream() const { return single_stream_; }
  // Every op waits for the one before it in topological order (a single stream, or a chain that
  // hands over between streams, as a tensor-parallel layer does to its all-reduces): the longest
  // path is then the sum of every duration. False for an empty graph; set by finalize().
  bool chain() const { return chain_; }

  // Longest path through the DAG where op v takes duration[v]. Fills finish[v] (when v ends if it
  // starts as soon as all its predecessors have ended) and via[v] (the predecessor its start
  // waited for, -1 when none). Spans must have size() elements.
  PathEnd longest_path(std::span<const double> duration, std::span<double> finish,
                       std::span<int> via) const;

 private:
  std::vector<OpNode> ops_;
  std::vector<std::pair<int, int>> edges_;
  std::vector<int> order_;
  std::vector<int> pred_begin_;  // predecessors of v: preds_[pred_begin_[v] .. pred_begin_[v+1])
  std::vector<int> preds_;
  bool single_stream_ = false;
  bool chain_ = false;
  bool finalized_ = false;
};

}  // namespace exitsim::sim
