#include "exitsim/policy/depthwise.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace exitsim::policy {
namespace {

struct Step {
  std::vector<DepthwiseStage> stages;
  std::vector<std::uint8_t> runs_head;
};

Step finish(const DepthwiseRule& rule, std::vector<DepthwiseStage> stages,
            const std::vector<std::uint8_t>& left_block) {
  std::vector<std::uint8_t> runs_head(stages.size(), 7);
  finish_depthwise_step(rule, stages, left_block, runs_head);
  return {stages, runs_head};
}

TEST(Depthwise, EveryTokenNotWaitingRunsTheNextRecursion) {
  EXPECT_EQ((DepthwiseStage{0, false}).next_recursion(), 1);
  EXPECT_EQ((DepthwiseStage{2, false}).next_recursion(), 3);
  EXPECT_EQ((DepthwiseStage{2, true}).next_recursion(), 0);
}

TEST(Depthwise, ImmediateRunsTheHeadOfEveryTokenThatLeftAndFreesItsSlot) {
  const Step step = finish({}, {{0, false}, {1, false}, {2, false}}, {1, 0, 1});
  EXPECT_EQ(step.runs_head, (std::vector<std::uint8_t>{1, 0, 1}));
  // The exited tokens' sequences start their next token at recursion 1; the other went deeper.
  EXPECT_EQ(step.stages[0], DepthwiseStage{});
  EXPECT_EQ(step.stages[1], (DepthwiseStage{2, false}));
  EXPECT_EQ(step.stages[2], DepthwiseStage{});
}

TEST(Depthwise, AccumulateHoldsExitedTokensUntilTheThreshold) {
  const DepthwiseRule rule{ExitedTokens::accumulate, 3};
  Step step = finish(rule, {{0, false}, {0, false}, {0, false}, {0, false}}, {1, 1, 0, 0});
  EXPECT_EQ(step.runs_head, (std::vector<std::uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(step.stages[0], (DepthwiseStage{1, true}));
  // The third exit reaches the threshold: all three waiting tokens run the head together.
  step = finish(rule, step.stages, {0, 0, 1, 0});
  EXPECT_EQ(step.runs_head, (std::vector<std::uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(step.stages[0], DepthwiseStage{});
  EXPECT_EQ(step.stages[3], (DepthwiseStage{2, false}));
}

TEST(Depthwise, AccumulateReleasesWaitingTokensWhenNothingIsLeftInTheBlock) {
  const DepthwiseRule rule{ExitedTokens::accumulate, 8};
  const Step step = finish(rule, {{1, true}, {1, false}}, {0, 1});
  EXPECT_EQ(step.runs_head, (std::vector<std::uint8_t>{1, 1}));
}

TEST(Depthwise, WaitingTokensRunNoRecursion) {
  const DepthwiseRule rule{ExitedTokens::accumulate, 8};
  const Step step = finish(rule, {{2, true}, {1, false}}, {1, 0});
  // left_block is not read for the waiting token: it stays where it left.
  EXPECT_EQ(step.stages[0], (DepthwiseStage{2, true}));
  EXPECT_EQ(step.stages[1], (DepthwiseStage{2, false}));
  EXPECT_EQ(step.runs_head, (std::vector<std::uint8_t>{0, 0}));
}

}  // namespace
}  // namespace exitsim::policy
