#include "exitsim/setup/executor_setup.hpp"

#include "exitsim/setup/policy_params.hpp"
#include "exitsim/setup/replay_lookup.hpp"

namespace exitsim::setup {

ExecutorSetup executor_setup(const scenario::Scenario& s) {
  const scenario::ReplicaGroup& group = s.replica_groups.front();
  ExecutorSetup out;
  out.scheduler = group.scheduler.kind;
  out.scheduler_params = scheduler_params(group.scheduler);
  out.limits = scheduler_limits(group.scheduler);
  out.block_size = group.scheduler.block_size;
  out.kv_blocks = group.scheduler.kv_blocks;
  out.strategy = sync_strategy(s.sync);
  out.depthwise = depthwise_rule(s.sync);
  out.exit_policy = exit_policy_params(s.exit_policy);
  if (s.exit_policy.kind == "replay" && out.strategy != policy::SyncStrategy::full_depth) {
    out.exit_policy.replay_lookup =
        token_trace_lookup(s.exit_policy.token_trace, group.model.shape.depth);
  }
  if (group.scheduler.preemption == "swap") {
    out.host_swap = host_swap_link(group.model.shape, group.hardware.spec, group.parallel,
                                   group.scheduler.block_size);
  }
  out.seed = s.seed;
  return out;
}

}  // namespace exitsim::setup
