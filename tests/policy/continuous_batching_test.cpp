#include <gtest/gtest.h>

#include "exitsim/policy/schedulers.hpp"
#include "policy/scheduler_cases.hpp"

namespace exitsim::policy::test {
namespace {

class ContinuousBatchingCase : public testing::TestWithParam<Case> {};

TEST_P(ContinuousBatchingCase, Decides) {
  expect_decision(ContinuousBatching{}, GetParam());
}

// With 1000 blocks the watermark is 10 blocks.
INSTANTIATE_TEST_SUITE_P(
    Table, ContinuousBatchingCase,
    testing::Values(Case{"AdmitsInQueueOrder",
                         {},
                         {arriving(1, 32), arriving(2, 16)},
                         kv(1000, 1000),
                         limits(8, 1000),
                         "preempt[] admit[w0 w1] work[w0:32 w1:16]"},
                    Case{"PrefillIterationIsPrefillOnly",
                         {decoding(1, 10, 2), decoding(2, 10, 5)},
                         {arriving(3, 10)},
                         kv(1000, 900),
                         limits(8, 1000),
                         "preempt[] admit[w0] work[w0:10]"},
                    Case{"AdmissionLimitedByMaxRunning",
                         {decoding(1, 10, 2), decoding(2, 10, 5)},
                         {arriving(3, 10), arriving(4, 10)},
                         kv(1000, 900),
                         limits(3, 1000),
                         "preempt[] admit[w0] work[w0:10]"},
                    Case{"AdmissionLimitedByTokenBudget",
                         {},
                         {arriving(1, 40), arriving(2, 40)},
                         kv(1000, 1000),
                         limits(8, 64),
                         "preempt[] admit[w0] work[w0:40]"},
                    Case{"PromptOverBudgetIsNeverAdmitted",
                         {decoding(1, 10, 2)},
                         {arriving(2, 100)},
                         kv(1000, 900),
                         limits(8, 64),
                         "preempt[] admit[] work[r0:1]"},
                    Case{"AdmissionLimitedByBlocks",
                         {},
                         {arriving(1, 48), arriving(2, 32)},
                         kv(1000, 14),
                         limits(8, 1000),
                         "preempt[] admit[w0] work[w0:48]"},
                    Case{"WatermarkKeepsBlocksForDecodes",
                         {decoding(1, 10, 2)},
                         {arriving(2, 48)},
                         kv(1000, 12),
                         limits(8, 1000),
                         "preempt[] admit[] work[r0:1]"},
                    Case{"PreemptedSequenceReadmittedAsWholePrefill",
                         {},
                         {preempted(1, 20, 4), arriving(2, 8)},
                         kv(1000, 1000),
                         limits(8, 1000),
                         "preempt[] admit[w0 w1] work[w0:24 w1:8]"},
                    Case{"DecodesAllWhenNothingToAdmit",
                         {decoding(1, 10, 3), decoding(2, 20, 1), decoding(3, 5, 7)},
                         {},
                         kv(1000, 500),
                         limits(8, 1000),
                         "preempt[] admit[] work[r0:1 r1:1 r2:1]"},
                    Case{"DecodesWithinTokenBudget",
                         {decoding(1, 10, 3), decoding(2, 20, 1), decoding(3, 5, 7)},
                         {},
                         kv(1000, 500),
                         limits(8, 2),
                         "preempt[] admit[] work[r0:1 r1:1]"},
                    Case{"PreemptsNewestAndExcludesVictim",
                         {decoding(1, 16, 1), decoding(2, 16, 1), decoding(3, 16, 1)},
                         {},
                         kv(10, 1),
                         limits(8, 1000),
                         "preempt[r2] admit[] work[r0:1 r1:1]"},
                    Case{"PreemptedNewestMayBeTheOnlyOneNeedingABlock",
                         {decoding(1, 10, 1), decoding(2, 16, 1)},
                         {},
                         kv(10, 0),
                         limits(8, 1000),
                         "preempt[r1] admit[] work[r0:1]"}),
    case_name);

}  // namespace
}  // namespace exitsim::policy::test
