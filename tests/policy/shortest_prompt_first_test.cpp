#include "exitsim/policy/shortest_prompt_first.hpp"

#include <gtest/gtest.h>

#include "policy/scheduler_cases.hpp"

namespace exitsim::policy::test {
namespace {

class ShortestPromptFirstCase : public testing::TestWithParam<Case> {};

TEST_P(ShortestPromptFirstCase, Decides) {
  expect_decision(ShortestPromptFirst{}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Table, ShortestPromptFirstCase,
                         testing::Values(Case{"AdmitsFewestPendingFirst",
                                              {},
                                              {arriving(1, 50), arriving(2, 10), arriving(3, 30)},
                                              kv(1000, 1000),
                                              limits(8, 1000),
                                              "preempt[] admit[w1 w2 w0] work[w1:10 w2:30 w0:50]"},
                                         Case{"TiesInQueueOrder",
                                              {},
                                              {arriving(1, 20), arriving(2, 10), arriving(3, 10)},
                                              kv(1000, 1000),
                                              limits(8, 1000),
                                              "preempt[] admit[w1 w2 w0] work[w1:10 w2:10 w0:20]"},
                                         Case{"StopsAtFirstShortestThatDoesNotFit",
                                              {},
                                              {arriving(1, 50), arriving(2, 10), arriving(3, 30)},
                                              kv(1000, 1000),
                                              limits(8, 45),
                                              "preempt[] admit[w1 w2] work[w1:10 w2:30]"},
                                         Case{"LimitedByMaxRunning",
                                              {decoding(1, 10, 1)},
                                              {arriving(2, 50), arriving(3, 10), arriving(4, 30)},
                                              kv(1000, 1000),
                                              limits(2, 1000),
                                              "preempt[] admit[w1] work[w1:10]"},
                                         Case{"PreemptedSequenceCountsItsRecompute",
                                              {},
                                              {preempted(1, 10, 30), arriving(2, 35)},
                                              kv(1000, 1000),
                                              limits(8, 1000),
                                              "preempt[] admit[w1 w0] work[w1:35 w0:40]"},
                                         Case{"DecodesLikeContinuous",
                                              {decoding(1, 10, 3), decoding(2, 20, 1)},
                                              {arriving(3, 100)},
                                              kv(1000, 500),
                                              limits(8, 64),
                                              "preempt[] admit[] work[r0:1 r1:1]"},
                                         Case{"PreemptsNewestLikeContinuous",
                                              {decoding(1, 16, 1), decoding(2, 16, 1),
                                               decoding(3, 16, 1)},
                                              {},
                                              kv(10, 1),
                                              limits(8, 1000),
                                              "preempt[r2] admit[] work[r0:1 r1:1]"}),
                         case_name);

}  // namespace
}  // namespace exitsim::policy::test
