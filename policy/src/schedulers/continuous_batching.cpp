#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {

namespace {

void schedule_continuous(const ContinuousBatching::Params& params,
                         const SchedulerSnapshot& snapshot, SchedulerDecision& out) {
  // Prefills first, whole prompts only, in queue order; the first that does not fit stops
  // admission so that a long prompt is not overtaken forever by shorter ones behind it.
  const std::int64_t watermark = watermark_blocks(snapshot.kv, params.watermark_fraction);
  admit_whole_prompts(snapshot, watermark, out);
  // An iteration with a prefill is prefill-only; decodes wait one iteration.
  if (admits_prompt(snapshot, out))
    return;
  // Sequences back from the head queue (depth-wise head_queue) bring decodes, not prompts: they
  // join the running set's decodes, admitted from what the running set leaves, in queue order.
  const bool readmits = !out.admit.empty();
  out.clear();
  const RunningPhase running = schedule_running(snapshot, RunningWork::all_pending, out);
  if (!readmits || !out.preempt.empty())
    return;  // nothing to readmit, or memory is short: admitting now would only preempt again
  admit_whole_prompts(
      snapshot,
      {block_occupants(snapshot.running), running.tokens, running.spare_blocks, watermark}, out);
}

}  // namespace

void ContinuousBatching::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  schedule_continuous(params_, snapshot, out);
  drop_idle_preemptions(out);
}

}  // namespace exitsim::policy
