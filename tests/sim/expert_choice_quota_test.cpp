// router_expert_choice in top_k mode realises its capacities over each sequence, whichever
// strategy groups the tokens: depth-wise steps (a few tokens entering at a time) and sequence-wise
// decode steps give the same, exact, per-depth counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

// Sequences of several lengths on MoR-SmolLM-360M (exits at 11, 21, 31), `max_running` at a time
// (continuous batching), synthetic U(0,1) router scores, top-k mode with `capacities`.
std::map<int, std::int64_t> exits_of(const std::string& strategy, const std::string& capacities,
                                     const std::vector<std::int64_t>& output_tokens,
                                     int max_running = 4) {
  std::vector<RequestDescriptor> requests;
  for (std::size_t i = 0; i < output_tokens.size(); ++i)
    requests.push_back({RequestId(static_cast<std::uint64_t>(i)), TimeNs{0}, 16, output_tokens[i]});
  test_support::VectorSource source(requests);
  const std::vector<std::string> overrides = {
      "model.preset=mor-smollm-360m-r3",
      "exit_policy.kind=router_expert_choice",
      "exit_policy.router_scores=uniform",
      "exit_policy.router_mode=top_k",
      "exit_policy.capacities=" + capacities,
      "sync.strategy=" + strategy,
      "scheduler.kind=continuous",
      "scheduler.max_running=" + std::to_string(max_running)};
  const auto s = scenario::load_default_scenario(overrides);
  return simulate(simulation_config_from(s, ""), source).summary.depth.exit_depth_tokens;
}

class ExpertChoiceQuotaSim : public testing::TestWithParam<std::string> {};

TEST_P(ExpertChoiceQuotaSim, MoRDefaultCapacitiesExitAThirdOfEachSequenceAtEachDepth) {
  // Each sequence's first token comes from its prefill at full depth (31); the policy decides the
  // rest: 3, 6, 30, 60 and 99 tokens. Capacities {1, 2/3, 1/3} keep each sequence's count at
  // every depth range within one token of its share, and a third of a multiple of three is whole,
  // so exactly 1 + 2 + 10 + 20 + 33 = 66 tokens exit at each depth (MoR's top-k over each
  // sequence: int(2/3 n) selected at recursion 2, int(1/3 n) at recursion 3).
  const auto exits =
      exits_of(GetParam(), "[1.0, 0.6666666666666666, 0.3333333333333333]", {4, 7, 31, 61, 100});
  EXPECT_EQ(exits, (std::map<int, std::int64_t>{{11, 66}, {21, 66}, {31, 66 + 5}}));
}

TEST_P(ExpertChoiceQuotaSim, UnevenCapacitiesAreRealisedPerSequence) {
  // Capacities {1, 1/2, 1/4}: half of each sequence's decoded tokens exit after recursion 1, a
  // quarter after 2 and a quarter after 3. Decoded 4, 8, 40 and 100 tokens (152 in all): 76, 38
  // and 38, plus the four prefill tokens at 31.
  const auto exits = exits_of(GetParam(), "[1.0, 0.5, 0.25]", {5, 9, 41, 101});
  EXPECT_EQ(exits, (std::map<int, std::int64_t>{{11, 76}, {21, 38}, {31, 38 + 4}}));
}

TEST_P(ExpertChoiceQuotaSim, MoR3MeanDepthIsWhatItsCapacitiesImply) {
  // docs/exit_policies.md's figure: 1,000 sequences of 256 outputs (255 decoded), capacities
  // {1, 0.67, 0.33}. Per sequence the count through recursion 2 is within one token of
  // 0.67 x 255 = 170.85 (170 or 171) and through recursion 3 of 0.33 x 255 = 84.15 (84 or 85), so
  // 84,000-85,000 decoded tokens exit at 31 (plus the 1,000 prefill tokens), 84,000-85,000 at 11,
  // and the mean depth (255 x 11 + 10 x (170..171 + 84..85) + 31) / 256 lies in [21.0, 21.078]
  // around the 21.039 the capacities imply. Ranking each step's tokens gave 21.697 (depthwise).
  std::vector<std::int64_t> outputs(1000, 256);
  const auto exits = exits_of(GetParam(), "[1.0, 0.67, 0.33]", outputs, 32);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_GE(exits.at(31) - 1000, 84000);
  EXPECT_LE(exits.at(31) - 1000, 85000);
  EXPECT_GE(exits.at(11), 255000 - 171000);
  EXPECT_LE(exits.at(11), 255000 - 170000);
  double layers = 0;
  for (const auto& [depth, tokens] : exits)
    layers += static_cast<double>(depth) * static_cast<double>(tokens);
  const double mean = layers / 256000.0;
  EXPECT_GE(mean, 21.0);
  EXPECT_LE(mean, 21.078);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ExpertChoiceQuotaSim,
                         testing::Values("depthwise", "state_copy", "skip_kv"),
                         [](const testing::TestParamInfo<std::string>& strategy) {
                           return strategy.param;
                         });

}  // namespace
}  // namespace exitsim::sim
