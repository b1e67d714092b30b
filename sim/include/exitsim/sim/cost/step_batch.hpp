#pragma once

// The batch a cost model prices, from the rows an executor ran (policy::StepRow): the one
// translation of a synchronization plan into priced work. The simulator prices its own
// iterations through it, and validation and the conformance suite price the engine's recorded
// steps through it, so the same plan is never priced two ways.

#include <span>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/sim/cost/cost_model.hpp"

namespace exitsim::sim {

// The entries of a step's rows: one per row, in order, then one per deferred-fill group beyond
// the first that joins a token (an older group's states attend as their own query over the
// tokens before them, from their depth to the token's), priced by the cost model: how the
// simulator times its iterations.
class StepPricer {
 public:
  StepPricer(const CostModel& model, const DepthStructure& depth, policy::SyncStrategy strategy)
      : model_(model), depth_(depth), strategy_(strategy) {}

  IterationCost price(std::span<const policy::StepRow> rows);
  // As price(rows), for the rows of the last price() call that differ from them only in their
  // context tokens, and are all decode rows without fill groups (a steady decode step): only the
  // contexts are written again.
  IterationCost price_new_contexts(std::span<const policy::StepRow> rows);
  // How long an iteration of that cost lasts: at least 1 ns, so the clock never stands still
  // while work proceeds.
  static TimeNs duration(const IterationCost& cost) { return cost.total > 1 ? cost.total : 1; }
  TimeNs duration(std::span<const policy::StepRow> rows) { return duration(price(rows)); }

 private:
  const CostModel& model_;
  DepthStructure depth_;
  policy::SyncStrategy strategy_;
  std::vector<BatchEntry> batch_;  // reused
};

}  // namespace exitsim::sim
