// The worked example of docs/schedulers.md: a scheduler written the way a user writes one, with
// the public API only. It is continuous batching with one change: admission takes the waiting
// sequence with the fewest pending tokens first instead of the head of the queue.
#include "exitsim/policy/shortest_prompt_first.hpp"

#include <memory>
#include <optional>
#include <span>

#include "exitsim/policy/scheduler_registry.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {
namespace {

// The waiting sequence that comes next in (pending tokens, queue position) order after `after`.
// Walking the order this way needs no sorted copy of the queue, so the scheduler stays
// allocation-free.
std::optional<std::size_t> next_shortest(std::span<const SequenceView> waiting,
                                         std::optional<std::size_t> after) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    const std::int64_t pending = waiting[i].pending_tokens();
    if (pending < 1)
      continue;
    if (after) {
      const std::int64_t last = waiting[*after].pending_tokens();
      if (pending < last || (pending == last && i <= *after))
        continue;  // already taken
    }
    if (!best || pending < waiting[*best].pending_tokens())
      best = i;
  }
  return best;
}

}  // namespace

void ShortestPromptFirst::schedule(const SchedulerSnapshot& snapshot,
                                   SchedulerDecision& out) const {
  const SchedulerLimits& limits = snapshot.limits;
  std::int64_t running = block_occupants(snapshot.running);
  std::int64_t tokens = 0;
  std::int64_t spare = snapshot.kv.free_blocks - watermark_blocks(snapshot.kv, watermark_fraction_);
  for (auto i = next_shortest(snapshot.waiting, std::nullopt); i;
       i = next_shortest(snapshot.waiting, i)) {
    const SequenceView& seq = snapshot.waiting[*i];
    const std::int64_t pending = seq.pending_tokens();
    const std::int64_t blocks = blocks_to_grow(seq, pending, snapshot.kv);
    // Later candidates are no shorter, so the first that does not fit ends admission.
    if (!admits_alone(snapshot, running, blocks) &&
        (running + 1 > limits.max_running || tokens + pending > limits.max_batched_tokens ||
         blocks > spare))
      break;
    out.admit.push_back(*i);
    out.work.push_back({{true, *i}, pending});
    ++running;
    tokens += pending;
    spare -= blocks;
  }
  if (!out.work.empty())
    return;  // prefill-only iteration, as in continuous batching
  schedule_running(snapshot, RunningWork::all_pending, out);
}

void register_shortest_prompt_first() {
  register_scheduler("shortest_prompt_first", [](const SchedulerParams& params) {
    return std::make_unique<ShortestPromptFirst>(params.watermark_fraction);
  });
}

}  // namespace exitsim::policy
