#include <algorithm>
#include <numeric>

#include "exitsim/policy/scheduler_steps.hpp"
#include "exitsim/policy/schedulers.hpp"

namespace exitsim::policy {
namespace {

bool is_prefilling(const SequenceView& seq) {
  return !seq.is_decoding() && seq.pending_tokens() > 0;
}

// Gives running[0, kept) sequences that are still prefilling a chunk each, in admission order.
void continue_prefills(const SchedulerSnapshot& snapshot, std::size_t kept, std::int64_t& budget,
                       std::int64_t& spare, SchedulerDecision& out) {
  for (std::size_t i = 0; i < kept && budget > 0; ++i) {
    const SequenceView& seq = snapshot.running[i];
    if (!is_prefilling(seq))
      continue;
    const std::int64_t chunk = std::min(budget, tokens_within_blocks(seq, spare, snapshot.kv));
    if (chunk < 1)
      continue;
    out.work.push_back({{false, i}, chunk});
    budget -= chunk;
    spare -= blocks_to_grow(seq, chunk, snapshot.kv);
  }
}

// Blocks the running prefills still need to complete their prompts, beyond those they hold.
std::int64_t blocks_to_finish_prefills(const SchedulerSnapshot& snapshot, std::size_t kept,
                                       const SchedulerDecision& out) {
  std::int64_t blocks = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    const SequenceView& seq = snapshot.running[i];
    if (is_prefilling(seq))
      blocks += blocks_to_grow(seq, seq.pending_tokens(), snapshot.kv);
  }
  // This iteration's chunks are already charged to the spare blocks; the rest is reserved.
  for (const ScheduledWork& w : out.work) {
    if (w.sequence.waiting || w.sequence.index >= kept)
      continue;
    const SequenceView& seq = snapshot.running[w.sequence.index];
    if (is_prefilling(seq))
      blocks -= blocks_to_grow(seq, w.tokens, snapshot.kv);
  }
  return blocks;
}

void schedule_chunked(const ChunkedPrefill::Params& params, const SchedulerSnapshot& snapshot,
                      SchedulerDecision& out) {
  const RunningPhase decodes = schedule_running(snapshot, RunningWork::decodes, out);
  std::int64_t budget = snapshot.limits.max_batched_tokens - decodes.tokens;
  std::int64_t spare = decodes.spare_blocks;
  std::size_t kept = decodes.kept;
  continue_prefills(snapshot, kept, budget, spare, out);

  // Partial prefills can hold every block while none can take another: nothing would ever run
  // again. The oldest then takes blocks from the newest, so the oldest always makes progress.
  if (out.work.empty() && kept > 1 && is_prefilling(snapshot.running[0])) {
    std::size_t keep = kept;
    while (keep > 1 && tokens_within_blocks(snapshot.running[0], spare, snapshot.kv) < 1) {
      --keep;
      spare += snapshot.running[keep].freed_if_preempted();
    }
    out.preempt.insert(out.preempt.begin(), kept - keep, 0);
    std::iota(out.preempt.begin(), out.preempt.begin() + static_cast<std::ptrdiff_t>(kept - keep),
              keep);
    kept = keep;
    continue_prefills(snapshot, kept, budget, spare, out);
  }

  // Memory is short when something was preempted: admitting now would only preempt again.
  if (!out.preempt.empty())
    return;
  std::int64_t running = block_occupants(snapshot.running);
  spare -= watermark_blocks(snapshot.kv, params.watermark_fraction);
  std::int64_t unreserved = spare;
  if (params.reserve_prompt_blocks)
    unreserved -= blocks_to_finish_prefills(snapshot, kept, out);
  bool short_of_blocks = false;  // a sequence ahead waits for blocks (passes_when_short_of_blocks)
  for (std::size_t i = 0; i < snapshot.waiting.size(); ++i) {
    if (running >= snapshot.limits.max_running || budget < 1)
      break;
    const SequenceView& seq = snapshot.waiting[i];
    if (short_of_blocks && !passes_when_short_of_blocks(seq))
      continue;
    const std::int64_t chunk = std::min(budget, tokens_within_blocks(seq, spare, snapshot.kv));
    if (chunk < 1) {
      short_of_blocks = true;
      continue;
    }
    if (params.reserve_prompt_blocks) {
      // The whole prompt (a recompute: everything pending) must fit what is not yet promised.
      const std::int64_t whole = blocks_to_grow(seq, seq.pending_tokens(), snapshot.kv);
      if (whole > unreserved && !(running == 0 && out.work.empty())) {
        short_of_blocks = true;
        continue;
      }
      unreserved -= whole;
    }
    out.admit.push_back(i);
    out.work.push_back({{true, i}, chunk});
    ++running;
    budget -= chunk;
    spare -= blocks_to_grow(seq, chunk, snapshot.kv);
  }
}

}  // namespace

void ChunkedPrefill::schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const {
  schedule_chunked(params_, snapshot, out);
  drop_idle_preemptions(out);
}

}  // namespace exitsim::policy
