// Policies whose depths do not depend on model outputs: distribution and position_schedule.

#include <algorithm>

#include "exit/exit_policies.hpp"

namespace exitsim::policy::exit {

DistributionExit::DistributionExit(std::vector<int> exit_points, const ExitPolicyParams& params)
    : ExitPolicy(std::move(exit_points)) {
  for (const ExitPositionBucket& bucket : params.position_buckets) {
    until_positions_.push_back(bucket.until_position);
    buckets_.emplace_back(bucket.probabilities);
  }
  buckets_.emplace_back(params.probabilities);
}

void DistributionExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
    const ExitToken& token = batch.tokens[i];
    // The first bucket whose until_position exceeds the position; past the last bucket the
    // index lands on the top-level sampler, stored after the buckets.
    const auto bucket =
        std::upper_bound(until_positions_.begin(), until_positions_.end(), token.position) -
        until_positions_.begin();
    out[i] = buckets_[static_cast<std::size_t>(bucket)].sample(token.uniform);
  }
}

PositionScheduleExit::PositionScheduleExit(std::vector<int> exit_points,
                                           const std::vector<ExitScheduleStep>& steps)
    : ExitPolicy(std::move(exit_points)) {
  const std::span<const int> points = this->exit_points();
  for (const ExitScheduleStep& step : steps) {
    from_positions_.push_back(step.from_position);
    // The smallest exit point at or above the scheduled depth: a token never gets less depth
    // than the schedule grants. Validation guarantees one exists.
    const auto point = std::lower_bound(points.begin(), points.end(), step.depth);
    step_exits_.push_back(static_cast<int>(point - points.begin()));
  }
}

void PositionScheduleExit::choose_exits(const ExitBatch& batch, std::span<int> out) const {
  check_output_size(batch, out);
  if (batch.tokens.empty())
    return;
  // SkipDecode gives the whole batch one depth. Under continuous batching the tokens sit at
  // different positions, so pick the step of the smallest position: depth does not increase
  // with position, so that step is the deepest any token's own schedule asks for, and no token
  // gets less depth than its schedule grants (the others get more, never less).
  std::int64_t position = batch.tokens.front().position;
  for (const ExitToken& token : batch.tokens)
    position = std::min(position, token.position);
  const auto after = std::upper_bound(from_positions_.begin(), from_positions_.end(), position) -
                     from_positions_.begin();
  const std::size_t step = after > 0 ? static_cast<std::size_t>(after - 1) : 0;
  std::fill(out.begin(), out.end(), step_exits_[step]);
}

}  // namespace exitsim::policy::exit
