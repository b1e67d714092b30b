#include "exitsim/sim/cost/op_graph.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <stdexcept>

namespace exitsim::sim {

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::input_norm:
      return "input_norm";
    case OpKind::qkv_projection:
      return "qkv_projection";
    case OpKind::kv_projection:
      return "kv_projection";
    case OpKind::attention_prefill:
      return "attention_prefill";
    case OpKind::attention_decode:
      return "attention_decode";
    case OpKind::output_projection:
      return "output_projection";
    case OpKind::post_attention_norm:
      return "post_attention_norm";
    case OpKind::moe_router:
      return "moe_router";
    case OpKind::mlp_gate_up:
      return "mlp_gate_up";
    case OpKind::mlp_activation:
      return "mlp_activation";
    case OpKind::mlp_down:
      return "mlp_down";
    case OpKind::final_norm:
      return "final_norm";
    case OpKind::lm_head:
      return "lm_head";
    case OpKind::sampling:
      return "sampling";
    case OpKind::tp_all_reduce:
      return "tp_all_reduce";
    case OpKind::logits_gather:
      return "logits_gather";
    case OpKind::probe_norm:
      return "probe_norm";
    case OpKind::probe_head:
      return "probe_head";
    case OpKind::probe_softmax:
      return "probe_softmax";
    case OpKind::probe_reduce:
      return "probe_reduce";
    case OpKind::host_op:
      return "host_op";
  }
  return "unknown";
}

int OpGraph::add_op(OpKind kind, int stream) {
  if (finalized_)
    throw std::logic_error("OpGraph::add_op after finalize");
  ops_.push_back({kind, stream});
  return size() - 1;
}

void OpGraph::add_dependency(int before, int after) {
  if (finalized_)
    throw std::logic_error("OpGraph::add_dependency after finalize");
  if (before < 0 || after < 0 || before >= size() || after >= size() || before == after) {
    throw std::logic_error("OpGraph::add_dependency: bad op id");
  }
  edges_.emplace_back(before, after);
}

void OpGraph::finalize() {
  if (finalized_)
    return;
  // Stream order: each op waits for the op added before it on the same stream.
  std::vector<int> last_on_stream;
  for (int v = 0; v < size(); ++v) {
    const auto stream = static_cast<std::size_t>(op(v).stream);
    if (stream >= last_on_stream.size())
      last_on_stream.resize(stream + 1, -1);
    if (last_on_stream[stream] >= 0)
      edges_.emplace_back(last_on_stream[stream], v);
    last_on_stream[stream] = v;
  }
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());

  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph graph(static_cast<Graph::vertices_size_type>(size()));
  for (const auto& [before, after] : edges_) {
    boost::add_edge(static_cast<Graph::vertex_descriptor>(before),
                    static_cast<Graph::vertex_descriptor>(after), graph);
  }
  std::vector<Graph::vertex_descriptor> reversed;
  try {
    boost::topological_sort(graph, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    throw std::logic_error("OpGraph::finalize: dependencies form a cycle");
  }
  order_.assign(reversed.rbegin(), reversed.rend());

  // Predecessor lists in one flat array, so the per-iteration walk touches contiguous memory.
  pred_begin_.assign(static_cast<std::size_t>(size()) + 1, 0);
  for (const auto& edge : edges_)
    ++pred_begin_[static_cast<std::size_t>(edge.second) + 1];
  for (std::size_t v = 0; v < static_cast<std::size_t>(size()); ++v) {
    pred_begin_[v + 1] += pred_begin_[v];
  }
  preds_.assign(edges_.size(), 0);
  std::vector<int> cursor(pred_begin_.begin(), pred_begin_.end() - 1);
  for (const auto& [before, after] : edges_) {
    preds_[static_cast<std::size_t>(cursor[static_cast<std::size_t>(after)]++)] = before;
  }
  single_stream_ = !ops_.empty() && std::all_of(ops_.begin(), ops_.end(), [&](const OpNode& node) {
    return node.stream == ops_.front().stream;
  });
  chain_ = !ops_.empty();
  for (std::size_t i = 1; i < order_.size(); ++i) {
    chain_ = chain_ &&
             std::binary_search(edges_.begin(), edges_.end(), std::pair{order_[i - 1], order_[i]});
  }
  finalized_ = true;
}

PathEnd OpGraph::longest_path(std::span<const double> duration, std::span<double> finish,
                              std::span<int> via) const {
  PathEnd end;
  for (const int v : order_) {
    const auto vi = static_cast<std::size_t>(v);
    double start = 0;
    int waited_for = -1;
    for (int k = pred_begin_[vi]; k < pred_begin_[vi + 1]; ++k) {
      const int p = preds_[static_cast<std::size_t>(k)];
      const double f = finish[static_cast<std::size_t>(p)];
      if (waited_for < 0 || f > start) {
        start = f;
        waited_for = p;
      }
    }
    finish[vi] = start + duration[vi];
    via[vi] = waited_for;
    if (end.sink < 0 || finish[vi] > end.length)
      end = {finish[vi], v};
  }
  return end;
}

}  // namespace exitsim::sim
