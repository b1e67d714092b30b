#pragma once

// Applying a scheduler decision (scheduler.hpp's contract), written once for every executor: the
// simulator's replica, the engine's loop and the scheduler tests' toy executor. Victims leave the
// running set and go to the front of the waiting queue in the order the decision lists them;
// admitted sequences leave the waiting queue and join the end of the running set in the order
// listed; each sequence of the new running set gets its tokens for the iteration.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/scheduler.hpp"

namespace exitsim::policy {

// A view after preemption by recompute: no K/V, nothing computed.
inline SequenceView preempted_view(SequenceView view) {
  view.computed_tokens = 0;
  view.kv_blocks = 0;
  view.shared_blocks = 0;
  view.kv_row_offset = {};
  view.in_head_queue = false;  // its token starts over
  view.returned_from_head = false;
  return view;
}

// head_queue (DepthwiseRule::requeues_after_head): the view of a sequence whose token's head ran,
// as it rejoins the waiting queue. It keeps its K/V and its next token is pending.
inline SequenceView requeued_view(SequenceView view) {
  view.in_head_queue = false;
  view.returned_from_head = true;
  return view;
}

// head_queue: the sequences whose head ran in the last step (`returning`, in running order, their
// views requeued_view's) join the waiting queue, which holds every arrival up to the step's end:
// at its back (MoR's loop), or at its front in the same order with
// DepthwiseRule::returns_ahead_of_waiting. Executors call it as their next step begins.
template <class Queue, class Item>
void requeue_returning(const DepthwiseRule& rule, std::vector<Item>& returning, Queue& waiting) {
  if (rule.returns_ahead_of_waiting) {
    for (std::size_t k = returning.size(); k-- > 0;)
      waiting.push_front(std::move(returning[k]));
  } else {
    for (Item& item : returning)
      waiting.push_back(std::move(item));
  }
  returning.clear();
}

// Sequences back from the head queue wait holding K/V that no preemption of the running set can
// free. When a decision schedules nothing, the running set or the queue's head may be waiting for
// exactly those blocks: the executor then preempts (by recompute) the waiting sequence this
// returns, the last in queue order that holds blocks, and schedules again, until something runs
// or none holds any (std::nullopt). Without it such a replica would stall for ever.
std::optional<std::size_t> waiting_kv_holder_to_release(const SchedulerSnapshot& snapshot);

// `work[i]` = the decision's tokens for running sequence i after the decision is applied, where
// `preempted_sorted` are the victims' snapshot indices (ascending) and `kept` the running
// sequences that stayed (the admitted follow them, in the order listed).
void map_work_to_running(const SchedulerDecision& decision,
                         std::span<const std::size_t> preempted_sorted, std::size_t kept,
                         std::vector<std::int64_t>& work);

// Storage apply_decision reuses between iterations.
template <class Item>
struct DecisionScratch {
  std::vector<Item> admitted;
  std::vector<Item> victims;
  std::vector<std::size_t> sorted;
  std::vector<std::size_t> preempted_sorted;
};

// Applies `decision` to an executor's queues. `Queue` holds the executor's sequences in the
// snapshot's order and provides `Item at(i)` (a copy, with its SequenceView as `view`),
// `remove(sorted indices)`, `push_back(Item)`, `push_front(Item)` and `size()`. `on_preempt(Item&)`
// frees a victim's K/V and resets its view (preempted_view) before it is queued. `work` gets the
// tokens of each sequence of the new running set.
template <class Queue, class Item, class OnPreempt>
void apply_decision(const SchedulerDecision& decision, Queue& running, Queue& waiting,
                    DecisionScratch<Item>& scratch, std::vector<std::int64_t>& work,
                    OnPreempt&& on_preempt) {
  // Admissions index the snapshot's waiting queue: take them out before victims join its front.
  scratch.admitted.clear();
  for (const std::size_t index : decision.admit)
    scratch.admitted.push_back(waiting.at(index));
  scratch.sorted.assign(decision.admit.begin(), decision.admit.end());
  std::sort(scratch.sorted.begin(), scratch.sorted.end());
  waiting.remove(scratch.sorted);

  scratch.victims.clear();
  for (const std::size_t index : decision.preempt) {
    scratch.victims.push_back(running.at(index));
    on_preempt(scratch.victims.back());
  }
  scratch.preempted_sorted.assign(decision.preempt.begin(), decision.preempt.end());
  std::sort(scratch.preempted_sorted.begin(), scratch.preempted_sorted.end());
  running.remove(scratch.preempted_sorted);
  for (std::size_t k = scratch.victims.size(); k-- > 0;)
    waiting.push_front(std::move(scratch.victims[k]));
  const std::size_t kept = running.size();
  for (Item& item : scratch.admitted) {
    item.view.returned_from_head = false;  // it holds a slot in the block again
    running.push_back(std::move(item));
  }
  map_work_to_running(decision, scratch.preempted_sorted, kept, work);
  work.resize(running.size(), 0);
}

}  // namespace exitsim::policy
