#include "exitsim/sim/policy_params.hpp"

namespace exitsim::sim {

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
  return rule;
}

}  // namespace exitsim::sim
