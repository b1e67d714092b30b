#include <gtest/gtest.h>

#include "exitsim/policy/schedulers.hpp"
#include "policy/scheduler_cases.hpp"

namespace exitsim::policy::test {
namespace {

class ChunkedPrefillCase : public testing::TestWithParam<Case> {};

TEST_P(ChunkedPrefillCase, Decides) {
  expect_decision(ChunkedPrefill{}, GetParam());
}

// With 1000 blocks the admission watermark is 10 blocks.
INSTANTIATE_TEST_SUITE_P(Table, ChunkedPrefillCase,
                         testing::Values(Case{"LongPromptTakesOneBudgetChunk",
                                              {},
                                              {arriving(1, 100)},
                                              kv(1000, 1000),
                                              limits(8, 32),
                                              "preempt[] admit[w0] work[w0:32]"},
                                         Case{"RunningPrefillContinuesBeforeAdmission",
                                              {prefilling(1, 100, 32)},
                                              {arriving(2, 50)},
                                              kv(1000, 900),
                                              limits(8, 80),
                                              "preempt[] admit[w0] work[r0:68 w0:12]"},
                                         Case{"DecodesFirstThenPrefillChunks",
                                              {decoding(1, 10, 2), prefilling(2, 100, 32)},
                                              {arriving(3, 40)},
                                              kv(1000, 900),
                                              limits(8, 50),
                                              "preempt[] admit[] work[r0:1 r1:49]"},
                                         Case{"FirstTokenIsStillPrefill",
                                              {prefilling(1, 10, 9)},
                                              {},
                                              kv(1000, 900),
                                              limits(8, 50),
                                              "preempt[] admit[] work[r0:1]"},
                                         Case{"ChunkLimitedByBlocks",
                                              {prefilling(1, 100, 32)},
                                              {arriving(2, 10)},
                                              kv(1000, 2),
                                              limits(8, 1000),
                                              "preempt[] admit[] work[r0:32]"},
                                         Case{"AdmissionChunkLimitedByWatermark",
                                              {},
                                              {arriving(1, 100)},
                                              kv(1000, 11),
                                              limits(8, 1000),
                                              "preempt[] admit[w0] work[w0:16]"},
                                         Case{"AdmissionLimitedByMaxRunning",
                                              {decoding(1, 10, 2), decoding(2, 10, 5)},
                                              {arriving(3, 10), arriving(4, 10)},
                                              kv(1000, 900),
                                              limits(3, 100),
                                              "preempt[] admit[w0] work[r0:1 r1:1 w0:10]"},
                                         Case{"AdmitsSeveralInQueueOrderWithinBudget",
                                              {},
                                              {arriving(1, 10), arriving(2, 30), arriving(3, 30)},
                                              kv(1000, 1000),
                                              limits(8, 50),
                                              "preempt[] admit[w0 w1 w2] work[w0:10 w1:30 w2:10]"},
                                         Case{"DecodesPreemptNewestEvenIfPrefilling",
                                              {decoding(1, 16, 1), decoding(2, 16, 1),
                                               prefilling(3, 100, 32)},
                                              {arriving(4, 10)},
                                              kv(10, 0),
                                              limits(8, 1000),
                                              "preempt[r2] admit[] work[r0:1 r1:1]"},
                                         Case{"StalledPrefillsYieldToTheOldest",
                                              {prefilling(1, 64, 32), prefilling(2, 64, 32)},
                                              {},
                                              kv(4, 0),
                                              limits(8, 1000),
                                              "preempt[r1] admit[] work[r0:32]"}),
                         case_name);

// A 100-token prompt with a 32-token budget, next to a running decoder: every iteration the
// decoder goes first, and the prompt is prefilled in chunks of what is left over.
TEST(ChunkedPrefill, SplitsLongPromptOverIterationsAfterDecodes) {
  std::vector<SequenceView> running = {decoding(1, 10, 1)};
  std::vector<SequenceView> waiting = {arriving(2, 100)};
  const ChunkedPrefill scheduler;
  std::vector<std::string> decisions;
  for (int iteration = 0; iteration < 5; ++iteration) {
    const SchedulerSnapshot snapshot{running, waiting, kv(1000, 900), limits(8, 32), 0};
    SchedulerDecision decision;
    scheduler.schedule(snapshot, decision);
    ASSERT_EQ(check_decision(snapshot, decision), "");
    decisions.push_back(describe(decision));
    for (std::size_t i : decision.admit)
      running.push_back(waiting[i]);
    if (!decision.admit.empty())
      waiting.clear();
    for (const ScheduledWork& work : decision.work) {
      // Admitted sequences were appended in admit order; this test admits at most one.
      SequenceView& seq = work.sequence.waiting ? running.back() : running[work.sequence.index];
      seq.computed_tokens += work.tokens;
      seq.kv_blocks = blocks(seq.computed_tokens);
      if (seq.pending_tokens() == 0)
        ++seq.generated_tokens;
    }
  }
  EXPECT_EQ(decisions, (std::vector<std::string>{
                           "preempt[] admit[w0] work[r0:1 w0:31]",
                           "preempt[] admit[] work[r0:1 r1:31]",
                           "preempt[] admit[] work[r0:1 r1:31]",
                           "preempt[] admit[] work[r0:1 r1:7]",
                           "preempt[] admit[] work[r0:1 r1:1]",
                       }));
}

}  // namespace
}  // namespace exitsim::policy::test
