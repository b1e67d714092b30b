#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {

void StaticBatching::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  if (!snapshot.running.empty()) {
    // The batch runs to completion; sequences it preempts wait for the next batch.
    schedule_running(snapshot, RunningWork::all_pending, out);
    return;
  }
  const SchedulerLimits& limits = snapshot.limits;
  std::int64_t batch = 0;
  std::int64_t tokens = 0;
  std::int64_t spare = snapshot.kv.free_blocks;
  for (std::size_t i = 0; i < snapshot.waiting.size(); ++i) {
    const SequenceView& seq = snapshot.waiting[i];
    const std::int64_t pending = seq.pending_tokens();
    if (pending < 1)
      continue;
    if (batch + 1 > limits.max_running || tokens + pending > limits.max_batched_tokens)
      break;
    const std::int64_t blocks = blocks_to_grow(seq, pending, snapshot.kv);
    if (blocks > spare)
      break;
    out.admit.push_back(i);
    out.work.push_back({{true, i}, pending});
    ++batch;
    tokens += pending;
    spare -= blocks;
  }
}

}  // namespace exitsim::policy
