#include <gtest/gtest.h>

#include "exitsim/policy/schedulers.hpp"
#include "policy/scheduler_cases.hpp"

namespace exitsim::policy::test {
namespace {

class StaticBatchingCase : public testing::TestWithParam<Case> {};

TEST_P(StaticBatchingCase, Decides) {
  expect_decision(StaticBatching{}, GetParam());
}

// Three decoders, each at a block boundary, so each decode step needs one new block.
const std::vector<SequenceView> k_three_at_boundary = {decoding(1, 16, 1), decoding(2, 16, 1),
                                                       decoding(3, 16, 1)};

INSTANTIATE_TEST_SUITE_P(Table, StaticBatchingCase,
                         testing::Values(Case{"IdleAdmitsWholeBatchAndPrefillsIt",
                                              {},
                                              {arriving(1, 32), arriving(2, 16), arriving(3, 20)},
                                              kv(100, 100),
                                              limits(8, 1000),
                                              "preempt[] admit[w0 w1 w2] work[w0:32 w1:16 w2:20]"},
                                         Case{"AdmissionLimitedByMaxRunning",
                                              {},
                                              {arriving(1, 10), arriving(2, 10), arriving(3, 10)},
                                              kv(100, 100),
                                              limits(2, 1000),
                                              "preempt[] admit[w0 w1] work[w0:10 w1:10]"},
                                         Case{"AdmissionLimitedByTokenBudget",
                                              {},
                                              {arriving(1, 30), arriving(2, 30), arriving(3, 10)},
                                              kv(100, 100),
                                              limits(8, 64),
                                              "preempt[] admit[w0 w1] work[w0:30 w1:30]"},
                                         Case{"AdmissionLimitedByBlocks",
                                              {},
                                              {arriving(1, 40), arriving(2, 40)},
                                              kv(100, 5),
                                              limits(8, 1000),
                                              "preempt[] admit[w0] work[w0:40]"},
                                         Case{"QueueOrderWithoutSkipping",
                                              {},
                                              {arriving(1, 64), arriving(2, 16)},
                                              kv(100, 3),
                                              limits(8, 1000),
                                              "preempt[] admit[] work[]"},
                                         Case{"PreemptedSequenceRecomputesPromptAndOutputs",
                                              {},
                                              {preempted(1, 20, 5)},
                                              kv(100, 100),
                                              limits(8, 1000),
                                              "preempt[] admit[w0] work[w0:25]"},
                                         Case{"NeverAdmitsWhileBatchRuns",
                                              {decoding(1, 10, 3)},
                                              {arriving(2, 8)},
                                              kv(100, 50),
                                              limits(8, 1000),
                                              "preempt[] admit[] work[r0:1]"},
                                         Case{"DecodesEveryRunningSequence",
                                              {decoding(1, 10, 3), decoding(2, 20, 1),
                                               decoding(3, 5, 7)},
                                              {},
                                              kv(100, 50),
                                              limits(8, 1000),
                                              "preempt[] admit[] work[r0:1 r1:1 r2:1]"},
                                         Case{"PreemptsNewestWhenBlocksRunOut",
                                              k_three_at_boundary,
                                              {arriving(4, 8)},
                                              kv(10, 1),
                                              limits(8, 1000),
                                              "preempt[r2] admit[] work[r0:1 r1:1]"},
                                         Case{"PreemptsSeveralListedOldestFirst",
                                              {decoding(1, 16, 1), decoding(2, 16, 1),
                                               decoding(3, 16, 1), decoding(4, 16, 1)},
                                              {},
                                              kv(10, 0),
                                              limits(8, 1000),
                                              "preempt[r2 r3] admit[] work[r0:1 r1:1]"}),
                         case_name);

}  // namespace
}  // namespace exitsim::policy::test
