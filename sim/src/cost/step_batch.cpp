#include "exitsim/sim/cost/step_batch.hpp"

#include <algorithm>
#include <limits>

namespace exitsim::sim {
namespace {

void set_contexts(const policy::StepRow& row, BatchEntry& entry) {
  const auto count = std::min<std::size_t>(row.recursion_contexts, k_max_recursion_contexts);
  entry.recursion_context_count = static_cast<std::uint8_t>(count);
  for (std::size_t r = 0; r < count; ++r)
    entry.recursion_context[r] = row.recursion_context[r];
}

void set_depthwise(const policy::StepRow& row, const DepthStructure& depth, BatchEntry& entry) {
  entry.query_tokens = row.query_tokens;
  entry.context_tokens = row.context_tokens;
  entry.depth = depth.stacked_depth();
  entry.emits_token = row.emits;
  entry.coda = row.runs_head ? BatchEntry::Coda::run : BatchEntry::Coda::skip;
  if (row.recursion == 0) {
    // Waiting for its head: nothing to price, or only the coda and head when they run now.
    entry.query_tokens = row.runs_head ? 1 : 0;
    entry.start_depth = depth.stacked_depth();
    return;
  }
  // Every recursion's tokens share the block's weights: priced as recursion 1's layers, with the
  // attention context of the recursion the token is really at.
  entry.start_depth = row.recursion == 1 ? 0 : depth.prelude_layers;
  entry.depth = depth.prelude_layers + depth.block_layers;
  entry.recursion_context_count = 1;
  entry.recursion_context[0] = row.recursion_context[0];
}

// A reused entry back to the defaults, field by field, its recursion contexts left as they are
// (they are read only up to their count): measured against value-initialising every entry,
// simulator_bench's Azure replay took 347 ms against 394 (cbd1df7).
void reset(BatchEntry& e) {
  e.query_tokens = 0;
  e.context_tokens = 0;
  e.depth = 0;
  e.emits_token = false;
  e.start_depth = 0;
  e.coda = BatchEntry::Coda::from_start;
  e.pending_tokens = 0;
  e.pending_from_depth = 0;
  e.kv_only_depth = 0;
  e.useful_depth = std::numeric_limits<int>::max();
  e.reuse_first_recursion_kv = false;
  e.recursion_context_count = 0;
}

// Writes the batch of `rows` into out[0, n) and returns n, reusing out's entries.
std::size_t write_batch(std::span<const policy::StepRow> rows, const DepthStructure& depth,
                        policy::SyncStrategy strategy, std::vector<BatchEntry>& out) {
  // Entries are overwritten whole, never value-initialised first: on the simulator's hot path
  // the batch is rebuilt every iteration, and a fresh entry per row costs more than pricing it.
  const bool shared = strategy == policy::SyncStrategy::shared_kv;
  std::size_t n = 0;
  const auto next = [&]() -> BatchEntry& {
    if (n == out.size())
      out.emplace_back();
    BatchEntry& e = out[n++];
    reset(e);
    return e;
  };
  bool older_groups = false;
  for (const policy::StepRow& row : rows) {
    BatchEntry& entry = next();
    if (row.kind == policy::RowKind::depthwise) {
      set_depthwise(row, depth, entry);
      continue;
    }
    const policy::DepthPlan& plan = row.plan;
    entry.query_tokens = row.query_tokens;
    entry.context_tokens = row.context_tokens;
    entry.depth = plan.run_depth;
    entry.emits_token = row.emits;
    if (plan.useful_depth < plan.run_depth)
      entry.useful_depth = plan.useful_depth;
    entry.kv_only_depth = plan.kv_only_to;
    entry.reuse_first_recursion_kv = shared;
    set_contexts(row, entry);
    if (plan.fill_count > 0) {
      entry.pending_tokens = plan.fills[0].tokens;
      entry.pending_from_depth = plan.fills[0].depth;
      older_groups |= plan.fill_count > 1;
    }
  }
  if (!older_groups)
    return n;
  // Older fill groups: the last tokens of the context, newest group last.
  for (const policy::StepRow& row : rows) {
    std::int64_t newer = row.plan.fill_count > 0 ? row.plan.fills[0].tokens : 0;
    for (std::size_t g = 1; g < row.plan.fill_count; ++g) {
      const policy::FillGroup& group = row.plan.fills[g];
      newer += group.tokens;
      BatchEntry& fill = next();
      fill.query_tokens = group.tokens;
      fill.context_tokens = std::max<std::int64_t>(row.context_tokens - newer, 0);
      fill.depth = row.plan.run_depth;
      fill.start_depth = group.depth;
      fill.coda = BatchEntry::Coda::skip;
    }
  }
  return n;
}

}  // namespace

IterationCost StepPricer::price(std::span<const policy::StepRow> rows) {
  const std::size_t n = write_batch(rows, depth_, strategy_, batch_);
  return model_.iteration_cost(std::span<const BatchEntry>(batch_.data(), n));
}

IterationCost StepPricer::price_new_contexts(std::span<const policy::StepRow> rows) {
  for (std::size_t k = 0; k < rows.size(); ++k)
    batch_[k].context_tokens = rows[k].context_tokens;
  return model_.iteration_cost(std::span<const BatchEntry>(batch_.data(), rows.size()));
}

}  // namespace exitsim::sim
