#include "exitsim/setup/policy_params.hpp"

#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"

namespace exitsim::setup {

policy::ExitPolicyParams exit_policy_params(const scenario::ExitPolicyConfig& config) {
  policy::ExitPolicyParams params;
  params.kind = config.kind;
  params.threshold = config.threshold;
  params.confidence_measure = config.confidence_measure;
  params.calm_decay = config.calm_decay;
  params.router_mode = config.router_mode;
  params.capacities = config.capacities;
  params.probabilities = config.probabilities;
  for (const scenario::PositionBucket& bucket : config.position_buckets) {
    params.position_buckets.push_back({bucket.until_position, bucket.probabilities});
  }
  for (const scenario::DepthScheduleStep& step : config.schedule) {
    params.schedule.push_back({step.from_position, step.depth});
  }
  return params;
}

policy::DepthwiseRule depthwise_rule(const scenario::SyncConfig& sync) {
  policy::DepthwiseRule rule;
  if (sync.exited_tokens == "accumulate" || sync.exited_tokens == "head_queue") {
    rule.exited = sync.exited_tokens == "accumulate" ? policy::ExitedTokens::accumulate
                                                     : policy::ExitedTokens::head_queue;
    rule.accumulate_threshold = sync.accumulate_threshold;
  }
  rule.returns_ahead_of_waiting = sync.head_queue_returns == "ahead_of_waiting";
  return rule;
}

policy::SyncStrategy strategy_named(const std::string& name, const std::string& field) {
  const auto strategy = policy::parse_sync_strategy(name);
  if (!strategy) {
    throw InputError({"", 0, 0, field},
                     expected_found(one_of(policy::sync_strategy_names()), "\"" + name + "\""));
  }
  return *strategy;
}

policy::SyncStrategy sync_strategy(const scenario::SyncConfig& sync) {
  return strategy_named(sync.strategy, "sync.strategy");
}

policy::SchedulerParams scheduler_params(const scenario::SchedulerConfig& scheduler) {
  return {scheduler.preemption, scheduler.watermark_fraction, scheduler.reserve_prompt_blocks};
}

policy::SchedulerLimits scheduler_limits(const scenario::SchedulerConfig& scheduler) {
  return {scheduler.max_running, scheduler.max_batched_tokens};
}

}  // namespace exitsim::setup
