// A sequence larger than the token budget (a long prompt, or a preempted sequence whose
// recompute has outgrown the budget) must still run: alone, once nothing else is running.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "exitsim/policy/scheduler_registry.hpp"

namespace exitsim::policy {
namespace {

SequenceView waiting_sequence(std::uint64_t id, std::int64_t prompt, std::int64_t generated) {
  SequenceView v;
  v.id = RequestId(id);
  v.prompt_tokens = prompt;
  v.generated_tokens = generated;
  return v;
}

SchedulerDecision decide(const char* scheduler, const std::vector<SequenceView>& running,
                         const std::vector<SequenceView>& waiting, std::int64_t free_blocks) {
  const auto policy = make_scheduler(scheduler, {});
  const SchedulerSnapshot snapshot{running, waiting, {16, 100, free_blocks, {}}, {256, 256}, 0};
  SchedulerDecision out;
  policy->schedule(snapshot, out);
  EXPECT_EQ(check_decision(snapshot, out), "") << scheduler;
  return out;
}

TEST(AdmitAlone, OversizedSequenceRunsAloneWhenNothingElseRuns) {
  for (const char* scheduler : {"static", "continuous", "shortest_prompt_first"}) {
    // 300 prompt tokens plus 41 outputs to recompute, against a 256-token budget; all 100
    // blocks are free, so even the watermark is waived. (Shortest-first would take a shorter
    // sequence first, so it gets the long one alone.)
    std::vector<SequenceView> waiting = {waiting_sequence(1, 300, 41)};
    if (std::string_view(scheduler) != "shortest_prompt_first") {
      waiting.push_back(waiting_sequence(2, 10, 0));
    }
    const SchedulerDecision alone = decide(scheduler, {}, waiting, 100);
    ASSERT_EQ(alone.work.size(), 1u) << scheduler;
    EXPECT_EQ(alone.work[0].tokens, 341) << scheduler;
  }
}

TEST(AdmitAlone, OversizedSequenceWaitsWhileOthersRun) {
  SequenceView decoding = waiting_sequence(3, 20, 2);
  decoding.computed_tokens = 21;
  decoding.kv_blocks = 2;
  const SchedulerDecision busy =
      decide("continuous", {decoding}, {waiting_sequence(1, 300, 0)}, 98);
  EXPECT_TRUE(busy.admit.empty());
  ASSERT_EQ(busy.work.size(), 1u);
  EXPECT_FALSE(busy.work[0].sequence.waiting);
}

TEST(AdmitAlone, ChecksStillRejectAnOverBudgetBatchOfSeveral) {
  const std::vector<SequenceView> waiting = {waiting_sequence(1, 200, 0),
                                             waiting_sequence(2, 200, 0)};
  const SchedulerSnapshot snapshot{{}, waiting, {16, 100, 100, {}}, {256, 256}, 0};
  SchedulerDecision both;
  both.admit = {0, 1};
  both.work = {{{true, 0}, 200}, {{true, 1}, 200}};
  EXPECT_EQ(check_decision(snapshot, both), "work processes 400 tokens; max_batched_tokens is 256");
}

}  // namespace
}  // namespace exitsim::policy

namespace exitsim::policy {
namespace {

TEST(CheckDecision, PreemptionWithoutWorkIsInfeasible) {
  SequenceView running = waiting_sequence(1, 10, 1);
  running.computed_tokens = 10;
  running.kv_blocks = 1;
  const std::vector<SequenceView> set = {running};
  const SchedulerSnapshot snapshot{set, {}, {16, 100, 99, {}}, {256, 256}, 0};
  SchedulerDecision only_preempts;
  only_preempts.preempt = {0};
  EXPECT_EQ(check_decision(snapshot, only_preempts), "the decision preempts but schedules no work");
}

}  // namespace
}  // namespace exitsim::policy
