#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/policy/kv_layout.hpp"

namespace exitsim::policy {

// A sequence as a scheduler sees it. One model covers prefill, chunked prefill, decode and
// recompute after preemption: a sequence has `known_tokens()` tokens (prompt plus outputs so
// far), of which `computed_tokens` have K/V in memory. The rest are pending; an iteration that
// processes all pending tokens of a sequence emits its next output token.
struct SequenceView {
  RequestId id;
  TimeNs arrival = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;  // output tokens emitted so far
  std::int64_t computed_tokens = 0;   // tokens whose K/V is in memory
  std::int64_t kv_blocks = 0;         // blocks held now (KvView's units)
  // Of those, cached prompt blocks other sequences reference too (prefix caching): preempting
  // this one frees kv_blocks - shared_blocks.
  std::int64_t shared_blocks = 0;
  std::int64_t freed_if_preempted() const { return kv_blocks - shared_blocks; }
  // Depth-wise batching with sync.exited_tokens: head_queue: its token left the shared block and
  // waits in the head queue, so it holds no slot in the block; max_running counts the others.
  bool in_head_queue = false;
  // head_queue: a waiting sequence whose token's head ran. It rejoined the waiting queue keeping
  // its K/V (policy::requeue_returning) and re-enters the block only when admitted, by the same
  // checks as any waiting sequence; its pending token is a decode, not a prompt.
  bool returned_from_head = false;
  // What the executor's K/V manager holds, per row group of KvView::groups: rows beyond
  // computed_tokens. 0 everywhere for a sequence with every token's K/V at every layer; negative
  // where exited tokens kept none (skip_kv, depthwise); +1 where a depth-wise token in flight has
  // written its row already. kv_footprint() turns this into blocks.
  std::array<std::int32_t, k_max_kv_groups> kv_row_offset{};

  std::int64_t known_tokens() const { return prompt_tokens + generated_tokens; }
  std::int64_t pending_tokens() const { return known_tokens() - computed_tokens; }
  // A decode step processes exactly the last emitted token.
  bool is_decoding() const { return generated_tokens > 0 && pending_tokens() == 1; }
};

// The replica's paged K/V pool. Blocks hold block_size rows of one K/V instance (kv_layout.hpp);
// with the default single group of one instance, a block is block_size tokens at every layer.
struct KvView {
  std::int64_t block_size = 16;  // rows per block
  std::int64_t total_blocks = 0;
  std::int64_t free_blocks = 0;
  KvGroups groups;

  // Blocks per instance for `rows` rows, rounded up. Divides in 32 bits when the counts fit
  // (all real ones): kept for speed, added with 8355f22's steady decode steps (simulator_bench's
  // Azure chunked replay 0.48x, the two changes together).
  std::int64_t blocks_for(std::int64_t rows) const {
    const std::int64_t rounded_up = rows + block_size - 1;
    if (((rounded_up | block_size) >> 32) == 0)
      return static_cast<std::uint32_t>(rounded_up) / static_cast<std::uint32_t>(block_size);
    return rounded_up / block_size;
  }
};

struct SchedulerLimits {
  std::int64_t max_running = 256;          // sequences in the running set
  std::int64_t max_batched_tokens = 8192;  // tokens processed in one iteration
};

// Running sequences that hold a slot in the batch: all but those waiting in the head queue.
inline std::int64_t block_occupants(std::span<const SequenceView> running) {
  std::int64_t n = 0;
  for (const SequenceView& s : running)
    n += s.in_head_queue ? 0 : 1;
  return n;
}

// Read-only state of one replica at an iteration boundary.
struct SchedulerSnapshot {
  std::span<const SequenceView> running;  // admitted, in admission order (oldest first)
  std::span<const SequenceView> waiting;  // queue order: preempted sequences first, then arrivals
  KvView kv;
  SchedulerLimits limits;
  TimeNs now = 0;
};

// Where a scheduled sequence comes from: the running set, or the waiting queue (admitted now).
struct SequenceRef {
  bool waiting = false;
  std::size_t index = 0;  // into snapshot.running or snapshot.waiting

  friend bool operator==(const SequenceRef&, const SequenceRef&) = default;
};

struct ScheduledWork {
  SequenceRef sequence;
  std::int64_t tokens = 0;  // pending tokens processed this iteration (1 for a decode step)

  friend bool operator==(const ScheduledWork&, const ScheduledWork&) = default;
};

// What one iteration does. The executor applies it in this order: preempt (free the victims'
// K/V and set their computed tokens to 0; the waiting queue becomes the victims in the order
// listed, then the previous waiting queue), admit (move waiting sequences to the end of the
// running set, in the order listed), then run `work`, allocating the blocks each sequence needs
// for its new tokens. An empty `work` means the replica idles until something changes (an
// arrival or a completion).
//
// A decision must be feasible: every admitted sequence appears in `work`; the blocks `work`
// needs fit in free blocks plus those freed by preemption; the running set stays within
// max_running and the tokens within max_batched_tokens. check_decision() verifies this, and the
// executors check it in debug builds.
struct SchedulerDecision {
  std::vector<std::size_t> preempt;  // indices into snapshot.running
  std::vector<std::size_t> admit;    // indices into snapshot.waiting
  std::vector<ScheduledWork> work;

  // Keeps capacity: executors reuse one decision per replica to avoid per-iteration allocation.
  void clear() {
    preempt.clear();
    admit.clear();
    work.clear();
  }
};

// A batching policy. Implementations are pure: the decision depends only on the snapshot (and
// on the scheduler's construction-time parameters), so the simulator and the engine, given the
// same state, make the same choice.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string_view name() const = 0;
  // Fills `out` (cleared by the caller) with this iteration's decision.
  virtual void schedule(const SchedulerSnapshot& snapshot, SchedulerDecision& out) const = 0;
  // Whether prompts may be split across iterations. A scheduler that admits whole prompts only
  // (the default) can never serve a prompt longer than max_batched_tokens (servable.hpp).
  virtual bool chunks_prompts() const { return false; }
  // Whether, in every snapshot where steady_decode() holds (scheduler_steps.hpp), schedule()
  // decides exactly one decode token for each running sequence in running order, admitting and
  // preempting nothing. Executors may then skip the call (the simulator's steady decode steps);
  // a scheduler that says so must keep to it (every built-in does, and a test holds them to it).
  virtual bool decodes_all_when_steady() const { return false; }
};

// "" when the decision is feasible for the snapshot, else what is wrong (for tests and debug
// checks; not on the hot path of release builds).
std::string check_decision(const SchedulerSnapshot& snapshot, const SchedulerDecision& decision);

}  // namespace exitsim::policy
