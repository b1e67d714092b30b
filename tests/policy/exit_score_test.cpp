// Policies that read scores: confidence (with CALM's decay), oracle and the two MoR routers.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exitsim/policy/exit_policy.hpp"

namespace exitsim::policy {
namespace {

struct Token {
  std::int64_t position = 0;
  std::vector<double> scores;
};

std::vector<int> exits(const ExitPolicy& policy, const std::vector<Token>& tokens,
                       std::int64_t max_position = 0) {
  std::vector<ExitToken> batch;
  std::uint64_t request = 0;
  for (const Token& t : tokens)
    batch.push_back({RequestId{++request}, t.position, 0.0, t.scores});
  std::vector<std::size_t> scratch(tokens.size());
  std::vector<int> out(tokens.size(), -1);
  policy.choose_exits({batch, max_position, scratch, std::nullopt}, out);
  return out;
}

DepthStructure mor3() {
  return DepthStructure::middle_cycle(32, 3);
}

ExitPolicyParams confidence(double threshold, double calm_decay = 0.0) {
  ExitPolicyParams p;
  p.kind = "confidence";
  p.threshold = threshold;
  p.calm_decay = calm_decay;
  return p;
}

TEST(ConfidenceExit, ExitsAtTheFirstExitPointReachingTheThreshold) {
  const auto policy = make_exit_policy(confidence(0.8), mor3());
  EXPECT_EQ(policy->name(), "confidence");
  EXPECT_EQ(exits(*policy, {{0, {0.9, 0.1, 0.0}},
                            {0, {0.8, 0.9, 0.0}},
                            {0, {0.79, 0.85, 0.0}},
                            {0, {0.5, 0.6, 0.99}},
                            {0, {0.5, 0.6}}}),  // the last exit point's score is not needed
            (std::vector<int>{0, 0, 1, 2, 2}));
}

TEST(ConfidenceExit, TooFewScoresIsAnExecutorBug) {
  const auto policy = make_exit_policy(confidence(0.8), mor3());
  EXPECT_THROW(exits(*policy, {{0, {0.9}}}), std::invalid_argument);
}

TEST(CalmThreshold, DecaysFromLambdaTowardsNineTenths) {
  EXPECT_DOUBLE_EQ(calm_threshold(0.9, 0.0, 50, 100), 0.9);
  EXPECT_DOUBLE_EQ(calm_threshold(0.9, 4.0, 0, 100), 0.9);
  EXPECT_DOUBLE_EQ(calm_threshold(0.9, 4.0, 50, 100), 0.9 * std::exp(-2.0) / 10 + 0.81);
  EXPECT_DOUBLE_EQ(calm_threshold(0.9, 4.0, 100, 100), 0.9 * std::exp(-4.0) / 10 + 0.81);
  EXPECT_NEAR(calm_threshold(0.9, 4.0, 100, 100), 0.811648, 1e-6);
  EXPECT_NEAR(calm_threshold(0.9, 1000.0, 100, 100), 0.81, 1e-12);
  // A horizon below 1 counts as 1.
  EXPECT_DOUBLE_EQ(calm_threshold(0.9, 4.0, 1, 0), calm_threshold(0.9, 4.0, 1, 1));
}

TEST(ConfidenceExit, CalmDecayLowersTheThresholdWithPosition) {
  // lambda 0.9, tau 4, N = 100: 0.9 at position 0, 0.8218 at 50, 0.8116 at 100.
  const auto policy = make_exit_policy(confidence(0.9, 4.0), mor3());
  const std::vector<double> scores = {0.85, 0.0, 0.0};
  EXPECT_EQ(exits(*policy, {{0, scores}, {10, scores}, {50, scores}, {100, scores}}, 100),
            (std::vector<int>{2, 2, 0, 0}));
  // 0.815 passes only near the horizon.
  EXPECT_EQ(exits(*policy, {{50, {0.815, 0, 0}}, {100, {0.815, 0, 0}}}, 100),
            (std::vector<int>{2, 0}));
  // The horizon is the batch's: a longer one keeps the threshold higher at the same position.
  EXPECT_EQ(exits(*policy, {{50, scores}}, 1000), (std::vector<int>{2}));
}

TEST(OracleExit, ExitsAtTheFirstExitPointAgreeingWithFullDepth) {
  ExitPolicyParams p;
  p.kind = "oracle";
  const auto policy = make_exit_policy(p, mor3());
  EXPECT_EQ(policy->name(), "oracle");
  EXPECT_EQ(exits(*policy, {{0, {1, 1, 1}}, {0, {0, 1, 1}}, {0, {0, 0, 1}}, {0, {0, 0}}}),
            (std::vector<int>{0, 1, 2, 2}));
}

TEST(TokenChoiceExit, TakesTheArgmaxWithTiesToTheShallower) {
  ExitPolicyParams p;
  p.kind = "router_token_choice";
  const auto policy = make_exit_policy(p, mor3());
  EXPECT_EQ(policy->name(), "router_token_choice");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(exits(*policy, {{0, {0.2, 0.5, 0.3}},
                            {0, {0.1, 0.1, 0.8}},
                            {0, {0.7, 0.2, 0.1}},
                            {0, {0.4, 0.4, 0.2}},
                            {0, {0.3, 0.35, 0.35}},
                            {0, {nan, 0.1, 0.2}}}),
            (std::vector<int>{1, 2, 0, 0, 1, 2}));
}

ExitPolicyParams expert(std::string mode, std::vector<double> capacities = {},
                        double threshold = 0.5) {
  ExitPolicyParams p;
  p.kind = "router_expert_choice";
  p.router_mode = std::move(mode);
  p.capacities = std::move(capacities);
  p.threshold = threshold;
  return p;
}

TEST(ExpertChoiceExit, ThresholdModeFiltersHierarchically) {
  const auto policy = make_exit_policy(expert("threshold"), mor3());
  EXPECT_EQ(policy->name(), "router_expert_choice");
  // Selected at recursion r iff scores[r] >= 0.5 and selected at every earlier recursion.
  EXPECT_EQ(exits(*policy, {{0, {0.9, 0.8, 0.2}},
                            {0, {0.6, 0.6, 0.6}},
                            {0, {0.5, 0.49, 0.9}},
                            {0, {0.9, 0.1, 0.9}},
                            {0, {0.1, 0.9, 0.9}}}),
            (std::vector<int>{1, 2, 0, 0, 0}));
}

// Top-k mode (capacities realised over a sequence): expert_choice_quota_test.cpp.

TEST(ExitConfidence, TopOneAndMargin) {
  const std::vector<float> probabilities = {0.1F, 0.6F, 0.05F, 0.25F};
  EXPECT_FLOAT_EQ(static_cast<float>(exit_confidence(probabilities, ConfidenceMeasure::top1)),
                  0.6F);
  EXPECT_FLOAT_EQ(static_cast<float>(exit_confidence(probabilities, ConfidenceMeasure::margin)),
                  0.35F);
  EXPECT_EQ(parse_confidence_measure("margin"), ConfidenceMeasure::margin);
  EXPECT_EQ(parse_confidence_measure("top1"), ConfidenceMeasure::top1);
  EXPECT_FALSE(parse_confidence_measure("entropy").has_value());
}

}  // namespace
}  // namespace exitsim::policy
