#pragma once

// The worked example of a user-written scheduler (docs/schedulers.md walks through it): it uses
// only the public scheduler API and is registered through register_scheduler(), exactly as a
// scheduler in a user's own program would be.

#include <string_view>

#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {

// `shortest_prompt_first`: continuous batching that admits the waiting sequence with the fewest
// pending tokens first (ties in queue order); otherwise as `continuous`.
class ShortestPromptFirst final : public Scheduler {
 public:
  explicit ShortestPromptFirst(double watermark_fraction = k_default_watermark_fraction)
      : watermark_fraction_(watermark_fraction) {}
  std::string_view name() const override { return "shortest_prompt_first"; }
  bool decodes_all_when_steady() const override { return true; }
  void schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const override;

 private:
  double watermark_fraction_;  // of total blocks kept free at admission (scheduler params)
};

// Registers the scheduler under "shortest_prompt_first".
void register_shortest_prompt_first();

}  // namespace exitsim::policy
