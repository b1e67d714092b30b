#include "exitsim/analysis/step_graph.hpp"

#include <algorithm>
#include <unordered_map>

#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::analysis {

namespace ops = traces::engine_ops;

sim::OpKind simulator_op_of(std::string_view engine_op) {
  static const std::unordered_map<std::string_view, sim::OpKind> k_map = {
      {ops::attn_norm, sim::OpKind::input_norm},
      {ops::qkv_proj, sim::OpKind::qkv_projection},
      {ops::attention, sim::OpKind::attention_decode},
      {ops::o_proj, sim::OpKind::output_projection},
      {ops::mlp_norm, sim::OpKind::post_attention_norm},
      {ops::mlp_gate_up, sim::OpKind::mlp_gate_up},
      {ops::mlp_act, sim::OpKind::mlp_activation},
      {ops::mlp_down, sim::OpKind::mlp_down},
      {ops::kv_only, sim::OpKind::kv_projection},
      {ops::lm_head, sim::OpKind::lm_head},
      {ops::sampling, sim::OpKind::sampling}};
  const auto it = k_map.find(engine_op);
  return it == k_map.end() ? sim::OpKind::host_op : it->second;
}

std::vector<StepGraph> step_graphs(const std::string& op_trace_path) {
  std::map<std::uint64_t, std::vector<traces::OpTraceRow>> by_step;
  traces::OpTraceReader reader(op_trace_path);
  while (auto row = reader.next())
    by_step[row->step_id].push_back(std::move(*row));

  std::vector<StepGraph> out;
  std::vector<double> duration, finish;
  std::vector<int> via;
  for (auto& [step, rows] : by_step) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    sim::OpGraph graph;
    duration.clear();
    StepGraph g;
    g.step = step;
    g.ops = rows.size();
    TimeNs first = rows.front().start_ns;
    TimeNs last = first;
    for (const traces::OpTraceRow& row : rows) {
      graph.add_op(simulator_op_of(row.name), row.stream);
      duration.push_back(static_cast<double>(row.duration_ns));
      first = std::min(first, row.start_ns);
      last = std::max(last, row.start_ns + row.duration_ns);
    }
    graph.finalize();  // stream order: each stream's ops in start order
    finish.assign(rows.size(), 0);
    via.assign(rows.size(), -1);
    const sim::PathEnd end = graph.longest_path(duration, finish, via);
    g.wall = last - first;
    g.critical_path_ns = end.length;
    for (int v = end.sink; v >= 0; v = via[static_cast<std::size_t>(v)]) {
      g.critical_by_kind_ns[std::string(sim::to_string(graph.op(v).kind))] +=
          duration[static_cast<std::size_t>(v)];
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace exitsim::analysis
