// The shared block's occupancy in one step, counted from the step's trace rows alone (the
// property tests' oracle: no counter of the executor under test is read).
#pragma once

#include <cstdint>

#include "exitsim/policy/step_trace.hpp"

namespace exitsim::test_support {

// Sequences whose token is in the shared block during `step`: a depth-wise row that runs a
// recursion (recursion >= 1; a row with recursion 0 only runs its head, its token having left
// the block) and a prompt row, which runs every layer, the block's included. Each sequence has
// at most one row per step, so this is the block call's batch in sequences.
inline std::int64_t block_occupancy(const policy::StepTrace& step) {
  std::int64_t in_block = 0;
  for (const policy::StepRow& row : step.rows) {
    const bool runs_block = row.kind == policy::RowKind::prefill ||
                            (row.kind == policy::RowKind::depthwise && row.recursion >= 1);
    in_block += runs_block ? 1 : 0;
  }
  return in_block;
}

}  // namespace exitsim::test_support
