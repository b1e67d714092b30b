#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {

void StaticBatching::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  if (!snapshot.running.empty()) {
    // The batch runs to completion; sequences it preempts wait for the next batch.
    schedule_running(snapshot, RunningWork::all_pending, out);
    return;
  }
  admit_whole_prompts(snapshot, 0, out);
}

}  // namespace exitsim::policy
