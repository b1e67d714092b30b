#pragma once

// The scenario's policy sections as the shared policies' parameters, for every executor that
// reads a scenario (the simulator, `exitsim engine run`).

#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::sim {

// Field for field; the executor adds what it alone can provide (the simulator replaces
// confidence by the measured distribution and gives replay its token trace).
policy::ExitPolicyParams exit_policy_params(const scenario::ExitPolicyConfig& config);

policy::DepthwiseRule depthwise_rule(const scenario::SyncConfig& sync);

}  // namespace exitsim::sim
