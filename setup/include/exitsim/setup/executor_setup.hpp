#pragma once

// A scenario as what either executor (the simulator's replica, the engine) needs from it to
// schedule, exit and synchronise as the other does: built once here, copied into each executor's
// own options (sim's ReplicaSpec reads the same functions; the engine's options in
// exitsim/engine/options_from_setup.hpp).

#include <cstdint>
#include <optional>
#include <string>

#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/setup/host_swap.hpp"

namespace exitsim::setup {

struct ExecutorSetup {
  std::string scheduler;  // scheduler.kind
  policy::SchedulerParams scheduler_params;
  policy::SchedulerLimits limits;
  std::int64_t block_size = 16;
  std::int64_t kv_blocks = 0;  // scheduler.kv_blocks as given; 0: the executor sizes its pool
  policy::SyncStrategy strategy = policy::SyncStrategy::full_depth;
  policy::DepthwiseRule depthwise;
  // The policy's parameters as the scenario gives them, replay's token-trace lookup attached.
  policy::ExitPolicyParams exit_policy;
  std::optional<HostSwapLink> host_swap;  // scheduler.preemption: swap
  std::uint64_t seed = 0;
};

// The scenario's first replica group (the one replica an engine runs). Replay's token trace is read
// (and checked against that group's model) only when the policy runs: not under full_depth, the
// baseline in which nobody exits. Throws InputError naming the key or file.
ExecutorSetup executor_setup(const scenario::Scenario& s);

}  // namespace exitsim::setup
