#pragma once

// The scenario's policy sections as the shared policies' parameters, for every executor that
// reads a scenario (the simulator, `exitsim engine run`, `validate`, the conformance suite).

#include <string>

#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::setup {

// Field for field; the executor adds what it alone can provide (the simulator replaces
// confidence by the measured distribution); executor_setup adds replay's token trace.
policy::ExitPolicyParams exit_policy_params(const scenario::ExitPolicyConfig& config);

policy::DepthwiseRule depthwise_rule(const scenario::SyncConfig& sync);

// The one parse of a strategy name. Throws InputError naming `field` ("sync.strategy",
// "--strategies") with the strategies there are.
policy::SyncStrategy strategy_named(const std::string& name, const std::string& field);
// sync.strategy of the scenario.
policy::SyncStrategy sync_strategy(const scenario::SyncConfig& sync);

policy::SchedulerParams scheduler_params(const scenario::SchedulerConfig& scheduler);
policy::SchedulerLimits scheduler_limits(const scenario::SchedulerConfig& scheduler);

}  // namespace exitsim::setup
