#pragma once

// The quality table `exitsim engine eval` writes: one row per exit setting it ran on an
// evaluation text (format: docs/exit_policies.md, "Quality tables"). The format and its strict
// reader live in the policy library, because the simulator reads the same files (ExitTable) and
// policy does not depend on the engine; the engine adds the step from its measurements to rows.

#include <span>

#include "exitsim/engine/quality_eval.hpp"
#include "exitsim/policy/quality_table.hpp"

namespace exitsim::engine {

using policy::QualityRow;
using policy::QualityTable;

// One measured setting as a row: kind "none" (evaluate_quality's full-depth baseline) becomes
// `full_depth`; confidence keeps its measure and threshold, adaptive_threshold its measure and
// initial threshold; router_expert_choice its threshold
// (router_mode threshold) or capacities (top_k); every other kind has no setting columns.
// calm_decay has no column: a decayed threshold is written as its base threshold.
QualityRow quality_row_of(const QualityMeasurement& measurement);

// The table of `measurements`, in the order the format asks for: rows grouped by policy in
// order of first appearance, each group's thresholds ascending, and a setting measured twice
// written once (the engine is deterministic, so both measurements are the same). Throws
// std::invalid_argument when a measurement breaks the format's rules (an empty exit
// distribution, fractions not summing to 1), which only a measuring bug produces.
QualityTable quality_table_of(std::span<const QualityMeasurement> measurements);

}  // namespace exitsim::engine
