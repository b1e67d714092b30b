// none, distribution, position_schedule and replay on hand-made batches.

#include "exitsim/policy/exit_policy.hpp"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/random.hpp"

namespace exitsim::policy {
namespace {

struct Token {
  std::uint64_t request = 0;
  std::int64_t position = 0;
  double uniform = 0.0;
};

std::vector<int> exits(const ExitPolicy& policy, const std::vector<Token>& tokens) {
  std::vector<ExitToken> batch;
  for (const Token& t : tokens)
    batch.push_back({RequestId{t.request}, t.position, t.uniform, {}});
  std::vector<int> out(tokens.size(), -1);
  policy.choose_exits({batch, 0, {}, std::nullopt}, out);
  return out;
}

// LayerSkip's Llama-2-7B: exit points 8, 16, 24, 32.
DepthStructure layerskip() {
  return find_model_preset("layerskip-llama-2-7b").value().depth;
}

// Three exit points: 11, 21, 31.
DepthStructure mor3() {
  return DepthStructure::middle_cycle(32, 3);
}

ExitPolicyParams distribution(std::vector<double> probabilities) {
  ExitPolicyParams p;
  p.kind = "distribution";
  p.probabilities = std::move(probabilities);
  return p;
}

TEST(NoExit, EveryTokenRunsTheFullDepth) {
  const auto policy = make_exit_policy({}, layerskip());
  EXPECT_EQ(policy->name(), "none");
  EXPECT_EQ(std::vector<int>(policy->exit_points().begin(), policy->exit_points().end()),
            (std::vector<int>{8, 16, 24, 32}));
  EXPECT_EQ(exits(*policy, {{1, 0, 0.0}, {2, 7, 0.5}, {3, 100, 0.99}}),
            (std::vector<int>{3, 3, 3}));
  EXPECT_TRUE(exits(*policy, {}).empty());
}

TEST(NoExit, RejectsAnOutputOfTheWrongSize) {
  const auto policy = make_exit_policy({}, layerskip());
  const std::vector<ExitToken> tokens(2);
  std::vector<int> out(3);
  EXPECT_THROW(policy->choose_exits({tokens, 0, {}, std::nullopt}, out), std::invalid_argument);
}

TEST(DistributionExit, InverseCdfOnTheUniformDraw) {
  const auto policy = make_exit_policy(distribution({0.25, 0.0, 0.5, 0.25}), layerskip());
  EXPECT_EQ(policy->name(), "distribution");
  // Cumulative 0.25, 0.25, 0.75, 1: a draw picks the first exit whose cumulative exceeds it.
  EXPECT_EQ(exits(*policy, {{1, 0, 0.0},
                            {1, 1, 0.2499},
                            {1, 2, 0.25},
                            {1, 3, 0.7499},
                            {1, 4, 0.75},
                            {1, 5, 0.999999999}}),
            (std::vector<int>{0, 0, 2, 2, 3, 3}));
}

TEST(DistributionExit, NeverPicksAnExitOfProbabilityZero) {
  // The cumulative sum of these rounds below 1; a draw above it goes to the last possible exit,
  // not to a trailing zero.
  const auto policy = make_exit_policy(distribution({0.0, 0.1, 0.7, 0.2 - 1e-9}), layerskip());
  EXPECT_EQ(exits(*policy, {{1, 0, 0.0}, {1, 0, -0.5}, {1, 0, 0.9999999999}, {1, 0, 1.0}}),
            (std::vector<int>{1, 1, 3, 3}));
  const auto leading = make_exit_policy(distribution({0.5, 0.5, 0.0, 0.0}), layerskip());
  EXPECT_EQ(exits(*leading, {{1, 0, 0.9999999999}, {1, 0, 1.0}}), (std::vector<int>{1, 1}));
}

TEST(DistributionExit, FrequenciesMatchTheProbabilities) {
  const std::vector<double> probabilities = {0.1, 0.2, 0.3, 0.4};
  const auto policy = make_exit_policy(distribution(probabilities), layerskip());
  RandomStream random(42, "exit_policy_test");
  constexpr int k_draws = 100'000;
  std::vector<Token> tokens;
  for (int i = 0; i < k_draws; ++i)
    tokens.push_back({static_cast<std::uint64_t>(i), 0, random.uniform()});
  std::vector<int> counts(probabilities.size());
  for (const int e : exits(*policy, tokens))
    ++counts[static_cast<std::size_t>(e)];
  for (std::size_t k = 0; k < probabilities.size(); ++k) {
    EXPECT_NEAR(counts[k] / static_cast<double>(k_draws), probabilities[k], 0.01) << k;
  }
}

TEST(DistributionExit, PositionBucketsApplyBelowTheirUntilPosition) {
  ExitPolicyParams p = distribution({0.0, 0.0, 1.0});
  p.position_buckets = {{10, {1.0, 0.0, 0.0}}, {100, {0.0, 1.0, 0.0}}};
  const auto policy = make_exit_policy(p, mor3());
  EXPECT_EQ(
      exits(*policy,
            {{1, 0, 0.5}, {1, 9, 0.5}, {1, 10, 0.5}, {1, 99, 0.5}, {1, 100, 0.5}, {1, 5000, 0.5}}),
      (std::vector<int>{0, 0, 1, 1, 2, 2}));
}

ExitPolicyParams schedule(std::vector<ExitScheduleStep> steps) {
  ExitPolicyParams p;
  p.kind = "position_schedule";
  p.schedule = std::move(steps);
  return p;
}

TEST(PositionScheduleExit, WholeBatchTakesTheDepthOfItsSmallestPosition) {
  // Depth 32 up to position 99, 24 up to 499, then 10, which no exit point has: 16 is the
  // smallest exit point at or above it.
  const auto policy = make_exit_policy(schedule({{0, 32}, {100, 24}, {500, 10}}), layerskip());
  EXPECT_EQ(policy->name(), "position_schedule");
  EXPECT_EQ(exits(*policy, {{1, 600}, {2, 150}, {3, 700}}), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(exits(*policy, {{1, 600}, {3, 700}}), (std::vector<int>{1, 1}));
  EXPECT_EQ(exits(*policy, {{1, 600}, {2, 5}}), (std::vector<int>{3, 3}));
  EXPECT_EQ(exits(*policy, {{1, 99}}), (std::vector<int>{3}));
  EXPECT_EQ(exits(*policy, {{1, 100}}), (std::vector<int>{2}));
  EXPECT_EQ(exits(*policy, {{1, 499}, {2, 500}}), (std::vector<int>{2, 2}));
  EXPECT_TRUE(exits(*policy, {}).empty());
}

TEST(PositionScheduleExit, NoTokenGetsLessDepthThanItsOwnSchedule) {
  const auto policy =
      make_exit_policy(schedule({{0, 32}, {10, 24}, {20, 16}, {30, 8}}), layerskip());
  const auto own = [&](std::int64_t position) { return exits(*policy, {{1, position}})[0]; };
  RandomStream random(7, "schedule");
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<Token> tokens;
    const std::int64_t size = random.uniform_int(1, 8);
    for (std::int64_t i = 0; i < size; ++i)
      tokens.push_back({static_cast<std::uint64_t>(i), random.uniform_int(0, 40)});
    const std::vector<int> chosen = exits(*policy, tokens);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(chosen[i], chosen[0]);
      EXPECT_GE(chosen[i], own(tokens[i].position));
    }
  }
}

TEST(ReplayExit, LooksTokensUpAndRunsMissingOnesAtFullDepth) {
  const std::map<std::pair<std::uint64_t, std::int64_t>, int> trace = {
      {{1, 0}, 0}, {{1, 1}, 2}, {{2, 0}, 1}};
  ExitPolicyParams p;
  p.kind = "replay";
  p.replay_lookup = [&trace](RequestId request, std::int64_t position) -> std::optional<int> {
    const auto it = trace.find({request.value, position});
    if (it == trace.end())
      return std::nullopt;
    return it->second;
  };
  const auto policy = make_exit_policy(p, mor3());
  EXPECT_EQ(policy->name(), "replay");
  EXPECT_EQ(exits(*policy, {{1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 0}}),
            (std::vector<int>{0, 2, 1, 2, 2}));
}

TEST(ReplayExit, AnIndexBeyondTheModelsExitPointsIsAnInputError) {
  ExitPolicyParams p;
  p.kind = "replay";
  p.replay_lookup = [](RequestId, std::int64_t) -> std::optional<int> { return 3; };
  const auto policy = make_exit_policy(p, mor3());
  try {
    exits(*policy, {{4, 9}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "exit_policy.token_trace: expected an exit point index in [0, 2] for request 4 "
                 "position 9, found 3");
  }
}

TEST(ExitPolicies, AreDeterministicAndStateless) {
  ExitPolicyParams p = distribution({0.3, 0.3, 0.4});
  p.position_buckets = {{5, {0.6, 0.2, 0.2}}};
  const auto a = make_exit_policy(p, mor3());
  const auto b = make_exit_policy(p, mor3());
  RandomStream random(3, "determinism");
  std::vector<Token> tokens;
  for (int i = 0; i < 1000; ++i) {
    tokens.push_back({static_cast<std::uint64_t>(i), random.uniform_int(0, 10), random.uniform()});
  }
  const std::vector<int> first = exits(*a, tokens);
  EXPECT_EQ(exits(*a, tokens), first);
  EXPECT_EQ(exits(*b, tokens), first);
}

// The simulator draws a token's exit and its router scores at once from exit_draws; the engine
// draws the exit alone (exit_uniform): the same numbers, draw by draw, under two seeds in turn.
TEST(ExitPolicies, ATokensDrawsAtOnceAreItsDrawsOneByOne) {
  for (const std::uint64_t seed : {7ULL, 8ULL, 7ULL}) {
    const KeyedUniform stream = exit_draws(seed);
    for (std::uint64_t request = 0; request < 5; ++request) {
      for (std::int64_t position = 0; position < 40; position += 13) {
        std::array<double, 5> draws{};
        stream.fill(request, static_cast<std::uint64_t>(position), draws);
        for (std::size_t d = 0; d < draws.size(); ++d) {
          ASSERT_EQ(draws[d], exit_uniform(seed, RequestId{request}, position, static_cast<int>(d)))
              << seed << " " << request << " " << position << " " << d;
        }
      }
    }
  }
  EXPECT_NE(exit_uniform(7, RequestId{1}, 2), exit_uniform(8, RequestId{1}, 2));
}

TEST(ExitPolicies, NamesListEveryKind) {
  EXPECT_EQ(exit_policy_names(),
            (std::vector<std::string>{"none", "confidence", "adaptive_threshold",
                                      "router_expert_choice", "router_token_choice", "oracle",
                                      "position_schedule", "replay", "distribution"}));
}

}  // namespace
}  // namespace exitsim::policy
