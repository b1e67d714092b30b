#include "exitsim/policy/scheduler_steps.hpp"

#include <algorithm>
#include <cassert>

namespace exitsim::policy {

std::int64_t tokens_within_blocks(const SequenceView& seq, std::int64_t spare_blocks,
                                  const KvView& kv) {
  const std::int64_t limit = seq.kv_blocks + std::max<std::int64_t>(0, spare_blocks);
  const std::int64_t pending = seq.pending_tokens();
  if (kv.groups.count == 1) {  // every instance holds the same rows: a closed form
    const std::int64_t capacity = limit / kv.groups.instances[0] * kv.block_size;
    return std::clamp<std::int64_t>(capacity - seq.computed_tokens - seq.kv_row_offset[0], 0,
                                    pending);
  }
  // The footprint grows with the tokens: the largest count within the limit, by bisection.
  std::int64_t low = 0;
  std::int64_t high = pending;
  while (low < high) {
    const std::int64_t mid = low + (high - low + 1) / 2;
    if (kv_footprint(seq, mid, kv) <= limit)
      low = mid;
    else
      high = mid - 1;
  }
  return kv_footprint(seq, low, kv) <= limit ? low : 0;
}

bool steady_decode(const SchedulerSnapshot& snapshot, std::span<std::int64_t> growth) {
  if (!snapshot.waiting.empty() ||
      static_cast<std::int64_t>(snapshot.running.size()) > snapshot.limits.max_batched_tokens)
    return false;
  std::int64_t needed = 0;
  for (std::size_t i = 0; i < snapshot.running.size(); ++i) {
    const SequenceView& seq = snapshot.running[i];
    if (!seq.is_decoding() || seq.in_head_queue)
      return false;
    const std::int64_t grow = blocks_to_grow(seq, 1, snapshot.kv);
    if (!growth.empty())
      growth[i] = grow;
    needed += grow;
  }
  return needed <= snapshot.kv.free_blocks;
}

std::int64_t watermark_blocks(const KvView& kv, double fraction) {
  return static_cast<std::int64_t>(static_cast<double>(kv.total_blocks) * fraction);
}

RunningPhase schedule_running(const SchedulerSnapshot& snapshot, RunningWork which,
                              SchedulerDecision& out) {
  assert(out.preempt.empty() && out.admit.empty() && out.work.empty());
  const auto& running = snapshot.running;
  std::int64_t budget = snapshot.limits.max_batched_tokens;
  std::int64_t needed = 0;
  for (std::size_t i = 0; i < running.size(); ++i) {
    const SequenceView& seq = running[i];
    const std::int64_t tokens =
        which == RunningWork::decodes ? (seq.is_decoding() ? 1 : 0) : seq.pending_tokens();
    if (tokens < 1 || tokens > budget)
      continue;
    out.work.push_back({{false, i}, tokens});
    budget -= tokens;
    needed += blocks_to_grow(seq, tokens, snapshot.kv);
  }

  // Work entries are in ascending running index, so a victim's entry, if any, is the last one.
  std::int64_t spare = snapshot.kv.free_blocks;
  std::size_t kept = running.size();
  while (needed > spare && kept > 0) {
    --kept;
    const SequenceView& victim = running[kept];
    spare += victim.freed_if_preempted();
    if (!out.work.empty() && out.work.back().sequence.index == kept) {
      needed -= blocks_to_grow(victim, out.work.back().tokens, snapshot.kv);
      budget += out.work.back().tokens;
      out.work.pop_back();
    }
  }
  for (std::size_t i = kept; i < running.size(); ++i)
    out.preempt.push_back(i);
  return {snapshot.limits.max_batched_tokens - budget, spare - needed, kept};
}

std::int64_t admit_whole_prompts(const SchedulerSnapshot& snapshot, AdmissionRoom room,
                                 SchedulerDecision& out) {
  const SchedulerLimits& limits = snapshot.limits;
  // Alone: nothing else runs in this iteration, so only the blocks must fit (admits_alone).
  const bool empty_iteration = room.occupants == 0 && room.tokens == 0;
  std::int64_t running = room.occupants;
  std::int64_t tokens = room.tokens;
  std::int64_t spare = room.free_blocks - room.watermark;
  bool short_of_blocks = false;  // a sequence ahead waits for blocks (passes_when_short_of_blocks)
  for (std::size_t i = 0; i < snapshot.waiting.size(); ++i) {
    const SequenceView& seq = snapshot.waiting[i];
    const std::int64_t pending = seq.pending_tokens();
    if (pending < 1 || (short_of_blocks && !passes_when_short_of_blocks(seq)))
      continue;
    const std::int64_t blocks = blocks_to_grow(seq, pending, snapshot.kv);
    const bool alone = empty_iteration && running == 0 && blocks <= room.free_blocks;
    if (!alone &&
        (running + 1 > limits.max_running || tokens + pending > limits.max_batched_tokens)) {
      break;
    }
    if (!alone && blocks > spare) {
      short_of_blocks = true;
      continue;
    }
    out.admit.push_back(i);
    out.work.push_back({{true, i}, pending});
    ++running;
    tokens += pending;
    spare -= blocks;
  }
  return tokens - room.tokens;
}

std::int64_t admit_whole_prompts(const SchedulerSnapshot& snapshot, std::int64_t watermark,
                                 SchedulerDecision& out) {
  return admit_whole_prompts(
      snapshot, {block_occupants(snapshot.running), 0, snapshot.kv.free_blocks, watermark}, out);
}

bool admits_prompt(const SchedulerSnapshot& snapshot, const SchedulerDecision& decision) {
  return std::any_of(decision.admit.begin(), decision.admit.end(),
                     [&](std::size_t i) { return !snapshot.waiting[i].returned_from_head; });
}

bool admits_alone(const SchedulerSnapshot& snapshot, std::int64_t running, std::int64_t blocks) {
  return running == 0 && blocks <= snapshot.kv.free_blocks;
}

void drop_idle_preemptions(SchedulerDecision& decision) {
  if (decision.work.empty())
    decision.preempt.clear();
}

}  // namespace exitsim::policy
