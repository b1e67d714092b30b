// Feasibility of a decision against its snapshot. Runs in tests and in debug builds of the
// executors, so clarity of the message matters more than speed.
#include <string>
#include <vector>

#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {
namespace {

std::string ref_name(SequenceRef ref) {
  return (ref.waiting ? "waiting[" : "running[") + std::to_string(ref.index) + "]";
}

std::string at(const char* list, std::size_t i) {
  return std::string(list) + "[" + std::to_string(i) + "]: ";
}

}  // namespace

std::string check_decision(const SchedulerSnapshot& snapshot, const SchedulerDecision& decision) {
  const std::size_t n_running = snapshot.running.size();
  const std::size_t n_waiting = snapshot.waiting.size();
  std::vector<bool> preempted(n_running, false);
  std::vector<bool> admitted(n_waiting, false);
  std::vector<bool> ran_running(n_running, false);
  std::vector<bool> ran_waiting(n_waiting, false);

  std::int64_t freed = 0;
  for (std::size_t i = 0; i < decision.preempt.size(); ++i) {
    const std::size_t index = decision.preempt[i];
    if (index >= n_running) {
      return at("preempt", i) + "index " + std::to_string(index) +
             " is out of range (running has " + std::to_string(n_running) + " sequences)";
    }
    if (preempted[index])
      return at("preempt", i) + "running[" + std::to_string(index) + "] is preempted twice";
    preempted[index] = true;
    freed += snapshot.running[index].freed_if_preempted();
  }
  for (std::size_t i = 0; i < decision.admit.size(); ++i) {
    const std::size_t index = decision.admit[i];
    if (index >= n_waiting) {
      return at("admit", i) + "index " + std::to_string(index) + " is out of range (waiting has " +
             std::to_string(n_waiting) + " sequences)";
    }
    if (admitted[index])
      return at("admit", i) + "waiting[" + std::to_string(index) + "] is admitted twice";
    admitted[index] = true;
  }

  std::int64_t tokens = 0;
  std::int64_t blocks = 0;
  for (std::size_t i = 0; i < decision.work.size(); ++i) {
    const ScheduledWork& work = decision.work[i];
    const SequenceRef ref = work.sequence;
    const std::size_t size = ref.waiting ? n_waiting : n_running;
    if (ref.index >= size) {
      return at("work", i) + ref_name(ref) + " is out of range (" +
             (ref.waiting ? "waiting" : "running") + " has " + std::to_string(size) + " sequences)";
    }
    std::vector<bool>& ran = ref.waiting ? ran_waiting : ran_running;
    if (ran[ref.index])
      return at("work", i) + ref_name(ref) + " is scheduled twice";
    ran[ref.index] = true;
    if (!ref.waiting && preempted[ref.index]) {
      return at("work", i) + ref_name(ref) + " is both preempted and scheduled";
    }
    if (ref.waiting && !admitted[ref.index]) {
      return at("work", i) + ref_name(ref) + " is scheduled but not admitted";
    }
    const SequenceView& seq =
        ref.waiting ? snapshot.waiting[ref.index] : snapshot.running[ref.index];
    if (work.tokens < 1 || work.tokens > seq.pending_tokens()) {
      return at("work", i) + ref_name(ref) + " is scheduled for " + std::to_string(work.tokens) +
             " tokens; expected 1 to its " + std::to_string(seq.pending_tokens()) +
             " pending tokens";
    }
    tokens += work.tokens;
    blocks += blocks_to_grow(seq, work.tokens, snapshot.kv);
  }
  for (std::size_t i = 0; i < decision.admit.size(); ++i) {
    if (!ran_waiting[decision.admit[i]]) {
      return at("admit", i) + "waiting[" + std::to_string(decision.admit[i]) +
             "] is admitted but not scheduled";
    }
  }

  // Sequences waiting in the head queue hold no slot (SequenceView::in_head_queue).
  std::int64_t occupants_preempted = 0;
  for (const std::size_t index : decision.preempt)
    occupants_preempted += snapshot.running[index].in_head_queue ? 0 : 1;
  const auto running_after =
      static_cast<std::size_t>(block_occupants(snapshot.running) - occupants_preempted +
                               static_cast<std::int64_t>(decision.admit.size()));
  const auto max_running = static_cast<std::size_t>(snapshot.limits.max_running);
  if (!decision.admit.empty() && running_after > max_running) {
    return "running set holds " + std::to_string(running_after) +
           " sequences after admission; max_running is " + std::to_string(max_running);
  }
  // A sequence running alone may exceed the budget (see admit_whole_prompts).
  if (tokens > snapshot.limits.max_batched_tokens && decision.work.size() > 1) {
    return "work processes " + std::to_string(tokens) + " tokens; max_batched_tokens is " +
           std::to_string(snapshot.limits.max_batched_tokens);
  }
  if (blocks > snapshot.kv.free_blocks + freed) {
    return "work needs " + std::to_string(blocks) + " new KV blocks; only " +
           std::to_string(snapshot.kv.free_blocks + freed) + " are free (" +
           std::to_string(snapshot.kv.free_blocks) + " free, " + std::to_string(freed) +
           " freed by preemption)";
  }
  // An executor starts no iteration for an empty `work`, so preemptions alone would never be
  // applied and the replica would idle with sequences left.
  if (decision.work.empty() && !decision.preempt.empty()) {
    return "the decision preempts but schedules no work";
  }
  return "";
}

}  // namespace exitsim::policy
