#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {

void ContinuousBatching::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  // Prefills first, whole prompts only, in queue order; the first that does not fit stops
  // admission so that a long prompt is not overtaken forever by shorter ones behind it.
  admit_whole_prompts(snapshot, watermark_blocks(snapshot.kv, params_.watermark_fraction), out);
  // An iteration with a prefill is prefill-only; decodes wait one iteration.
  if (!out.work.empty())
    return;
  schedule_running(snapshot, RunningWork::all_pending, out);
}

}  // namespace exitsim::policy
