#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {

void ContinuousBatching::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  // Prefills first, whole prompts only, in queue order; the first that does not fit stops
  // admission so that a long prompt is not overtaken forever by shorter ones behind it.
  const SchedulerLimits& limits = snapshot.limits;
  auto running = static_cast<std::int64_t>(snapshot.running.size());
  std::int64_t tokens = 0;
  std::int64_t spare =
      snapshot.kv.free_blocks - watermark_blocks(snapshot.kv, params_.watermark_fraction);
  for (std::size_t i = 0; i < snapshot.waiting.size(); ++i) {
    const SequenceView& seq = snapshot.waiting[i];
    const std::int64_t pending = seq.pending_tokens();
    if (pending < 1)
      continue;
    if (running + 1 > limits.max_running || tokens + pending > limits.max_batched_tokens)
      break;
    const std::int64_t blocks = blocks_to_grow(seq, pending, snapshot.kv);
    if (blocks > spare)
      break;
    out.admit.push_back(i);
    out.work.push_back({{true, i}, pending});
    ++running;
    tokens += pending;
    spare -= blocks;
  }
  // An iteration with a prefill is prefill-only; decodes wait one iteration.
  if (!out.work.empty())
    return;
  schedule_running(snapshot, RunningWork::all_pending, out);
}

}  // namespace exitsim::policy
