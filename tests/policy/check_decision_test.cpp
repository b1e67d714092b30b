#include <gtest/gtest.h>

#include "exitsim/policy/scheduler.hpp"
#include "policy/scheduler_cases.hpp"

namespace exitsim::policy::test {
namespace {

struct DecisionCase {
  std::string name;
  SchedulerDecision decision;
  std::string expected;
};

// running: r0 decodes (12 known, 11 computed, 1 block), r1 at a block boundary (17 known, 16
// computed, 1 block: its next step needs a new block); waiting: w0 a 60-token prompt (4 blocks),
// w1 a 10-token prompt. 2 blocks free, at most 3 running, 64 tokens per iteration.
class CheckDecision : public testing::TestWithParam<DecisionCase> {
 protected:
  std::vector<SequenceView> running_ = {decoding(1, 10, 2), decoding(2, 16, 1)};
  std::vector<SequenceView> waiting_ = {arriving(3, 60), arriving(4, 10)};
  SchedulerSnapshot snapshot() const { return {running_, waiting_, kv(10, 2), limits(3, 64), 0}; }
};

TEST_P(CheckDecision, Reports) {
  EXPECT_EQ(check_decision(snapshot(), GetParam().decision), GetParam().expected);
}

ScheduledWork run(std::size_t index, std::int64_t tokens) {
  return {{false, index}, tokens};
}
ScheduledWork start(std::size_t index, std::int64_t tokens) {
  return {{true, index}, tokens};
}

INSTANTIATE_TEST_SUITE_P(
    Table, CheckDecision,
    testing::Values(
        DecisionCase{"EmptyIsFeasible", {}, ""},
        DecisionCase{"DecodeBothIsFeasible", {{}, {}, {run(0, 1), run(1, 1)}}, ""},
        DecisionCase{"PreemptionFreesBlocksForAdmission", {{0, 1}, {0}, {start(0, 60)}}, ""},
        DecisionCase{"WaitingWorkOutOfRange",
                     {{}, {}, {start(9, 1)}},
                     "work[0]: waiting[9] is out of range (waiting has 2 sequences)"},
        DecisionCase{"PreemptOutOfRange",
                     {{2}, {}, {}},
                     "preempt[0]: index 2 is out of range (running has 2 sequences)"},
        DecisionCase{"PreemptTwice", {{1, 1}, {}, {}}, "preempt[1]: running[1] is preempted twice"},
        DecisionCase{"AdmitOutOfRange",
                     {{}, {5}, {}},
                     "admit[0]: index 5 is out of range (waiting has 2 sequences)"},
        DecisionCase{
            "AdmitTwice", {{}, {1, 1}, {start(1, 10)}}, "admit[1]: waiting[1] is admitted twice"},
        DecisionCase{"WorkOutOfRange",
                     {{}, {}, {run(7, 1)}},
                     "work[0]: running[7] is out of range (running has 2 sequences)"},
        DecisionCase{"WorkTwice",
                     {{}, {}, {run(0, 1), run(0, 1)}},
                     "work[1]: running[0] is scheduled twice"},
        DecisionCase{"PreemptedAndScheduled",
                     {{1}, {}, {run(1, 1)}},
                     "work[0]: running[1] is both preempted and scheduled"},
        DecisionCase{"ScheduledNotAdmitted",
                     {{}, {}, {start(1, 10)}},
                     "work[0]: waiting[1] is scheduled but not admitted"},
        DecisionCase{"AdmittedNotScheduled",
                     {{}, {1}, {}},
                     "admit[0]: waiting[1] is admitted but not scheduled"},
        DecisionCase{"ZeroTokens",
                     {{}, {}, {run(0, 0)}},
                     "work[0]: running[0] is scheduled for 0 tokens; expected 1 to its 1 pending "
                     "tokens"},
        DecisionCase{"MoreThanPending",
                     {{}, {1}, {start(1, 11)}},
                     "work[0]: waiting[1] is scheduled for 11 tokens; expected 1 to its 10 "
                     "pending tokens"},
        DecisionCase{"OverMaxRunning",
                     {{}, {0, 1}, {start(0, 8), start(1, 8)}},
                     "running set holds 4 sequences after admission; max_running is 3"},
        DecisionCase{"OverTokenBudget",
                     {{0}, {0, 1}, {start(0, 60), start(1, 10)}},
                     "work processes 70 tokens; max_batched_tokens is 64"},
        DecisionCase{"OverBlocks",
                     {{}, {0}, {run(1, 1), start(0, 60)}},
                     "work needs 5 new KV blocks; only 2 are free (2 free, 0 freed by "
                     "preemption)"},
        DecisionCase{"OverBlocksDespitePreemption",
                     {{1}, {0}, {run(0, 1), start(0, 60)}},
                     "work needs 4 new KV blocks; only 3 are free (2 free, 1 freed by "
                     "preemption)"}),
    [](const testing::TestParamInfo<DecisionCase>& param) { return param.param.name; });

}  // namespace
}  // namespace exitsim::policy::test
