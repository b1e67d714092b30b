#pragma once

// The simulator has no model to compute confidences, router scores or agreement with the full
// depth. Policies that decide from them are simulated from what the engine measured: the exit
// distribution of the same setting in `exitsim engine eval`'s quality table
// (exit_policy.threshold_table). Synthetic router scores are used only when asked for by name
// (exit_policy.router_scores: uniform).

#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::sim {

// Whether `config` is simulated through a measured exit distribution (measured_exit_distribution)
// rather than by the policy itself.
bool uses_measured_exits(const scenario::ExitPolicyConfig& config);

// The measured exit distribution (one probability per exit point of `depth`) of `config`'s
// setting under synchronization `strategy` (rows of other strategies are never used): confidence
// and router_expert_choice thresholds interpolated between measured rows, router_expert_choice
// top_k capacities and the setting-less oracle and router_token_choice as measured. Throws
// InputError naming the table or the key for a missing table, a table of other exit points,
// confidence measure or setting, and for CALM's decaying threshold (the table is measured at a
// constant one).
std::vector<double> measured_exit_distribution(const scenario::ExitPolicyConfig& config,
                                               const std::string& strategy,
                                               const DepthStructure& depth);

}  // namespace exitsim::sim
