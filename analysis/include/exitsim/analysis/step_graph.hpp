#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/traces/op_trace.hpp"

namespace exitsim::analysis {

// The simulator's op kind an engine op stands for (attention as decode attention: the op trace
// does not say which pass ran it); host_op for ops the simulator has no counterpart of.
sim::OpKind simulator_op_of(std::string_view engine_op);

// One engine step as a dependency graph (the simulator's OpGraph: ops in stream order per
// stream; on the CPU backend one stream, so the ops run one after another), and where its wall
// time went.
struct StepGraph {
  std::uint64_t step = 0;
  std::size_t ops = 0;
  TimeNs wall = 0;              // first op's start to last op's end
  double critical_path_ns = 0;  // longest path through the graph at the measured durations
  // Measured time per simulator op kind, on the critical path.
  std::map<std::string, double> critical_by_kind_ns;
};

// Builds every step's graph from an op trace (rows grouped by step id, in start order within a
// stream). Throws InputError for an unreadable or malformed trace.
std::vector<StepGraph> step_graphs(const std::string& op_trace_path);

}  // namespace exitsim::analysis
