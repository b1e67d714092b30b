// The engine's router_expert_choice in top_k mode: its real router scores, routed one recursion
// at a time, and each sequence's capacities realised over that sequence's tokens.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

class EngineExpertChoiceQuota : public testing::TestWithParam<std::string> {
 protected:
  EngineExpertChoiceQuota()
      : config_(test_support::small_config(test_support::small_recursive_depth())),
        weights_(test_support::small_weights(config_)),
        model_(config_, weights_) {}

  ModelConfig config_;
  ModelWeights weights_;
  CpuModel model_;
};

TEST_P(EngineExpertChoiceQuota, EachSequenceExitsAThirdOfItsTokensAtEachRecursion) {
  // Three recursions, capacities {1, 2/3, 1/3}: after n decode tokens of a sequence, the counts
  // through recursions 2 and 3 are within one token of 2n/3 and n/3, and exactly those when n is
  // a multiple of 3. The sequences decode 3, 6, 9 and 12 tokens after the one their prefill
  // emits (position 0, full depth), so each exits exactly n/3 at each of the three exit points,
  // whatever its router scores, its batch or the strategy.
  EngineOptions options;
  options.strategy = *policy::parse_sync_strategy(GetParam());
  options.exit_policy.kind = "router_expert_choice";
  options.exit_policy.router_mode = "top_k";
  options.exit_policy.capacities = {1.0, 2.0 / 3, 1.0 / 3};
  options.exit_policy.threshold = 0.5;
  options.kv_blocks = 64;
  options.block_size = 4;
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(i));
    r.prompt = {1, 2, 3, static_cast<std::int32_t>(5 + i)};
    r.output_tokens = 1 + 3 * (i + 1);
    reqs.push_back(r);
  }
  Engine engine(model_, options);
  const EngineRun run = engine.run(reqs);
  std::map<std::uint64_t, std::array<std::int64_t, 3>> exits;  // decode tokens per exit point
  for (const GeneratedToken& t : run.tokens) {
    if (t.position > 0)
      ++exits[t.request.value][static_cast<std::size_t>(t.exit_point)];
  }
  ASSERT_EQ(exits.size(), reqs.size());
  for (int i = 0; i < 4; ++i) {
    const std::int64_t third = i + 1;
    EXPECT_EQ(exits[static_cast<std::uint64_t>(i)],
              (std::array<std::int64_t, 3>{third, third, third}))
        << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, EngineExpertChoiceQuota,
                         testing::Values("depthwise", "state_copy", "skip_kv"),
                         [](const testing::TestParamInfo<std::string>& strategy) {
                           return strategy.param;
                         });

}  // namespace
}  // namespace exitsim::engine
