// FREE's adaptive threshold executed by the engine (issue 45, item 1): the estimator learns from
// deferred_fill's parallel passes only, one calibration pair per completed fill state and per exit
// point the deep token passed, and its moving threshold decides each exit as a fixed one would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

using test_support::small_config;
using test_support::small_recursive_depth;
using test_support::small_weights;

// Requests with prompts of 4, 7, 10, ... tokens; at most two run at once, so that admissions
// (which trigger the refits) are spread over the run.
std::vector<EngineRequest> requests(int count, std::int64_t output_tokens) {
  std::vector<EngineRequest> out;
  for (int i = 0; i < count; ++i) {
    EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(200 + i));
    for (int t = 0; t < 4 + 3 * i; ++t)
      r.prompt.push_back(static_cast<std::int32_t>((5 * t + 13 * i + 1) % 50));
    r.output_tokens = output_tokens;
    out.push_back(r);
  }
  return out;
}

EngineOptions options_for(const std::string& strategy, const std::string& kind, double threshold) {
  EngineOptions o;
  o.strategy = *policy::parse_sync_strategy(strategy);
  o.exit_policy.kind = kind;
  o.exit_policy.threshold = threshold;
  o.limits.max_running = 2;
  o.kv_blocks = 64;
  o.block_size = 4;
  return o;
}

class AdaptiveThresholdEngine : public testing::Test {
 protected:
  AdaptiveThresholdEngine()
      : config_(small_config(small_recursive_depth())),
        weights_(small_weights(config_)),
        model_(config_, weights_) {}

  EngineRun run(EngineOptions options, const std::vector<EngineRequest>& reqs) {
    Engine engine(model_, std::move(options));
    return engine.run(reqs);
  }

  // The requests teacher-forced to their full-depth outputs: deferred_fill's K/V is exact, so
  // every token then sees the same context whatever exits the run takes, and its confidence at
  // each exit point is the same in every run; only the threshold decides where it leaves.
  std::vector<EngineRequest> forced_requests(int count, std::int64_t output_tokens) {
    std::vector<EngineRequest> reqs = requests(count, output_tokens);
    const EngineRun full = run(options_for("full_depth", "none", 0.9), reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      reqs[i].forced = full.outputs[i];
    return reqs;
  }

  ModelConfig config_;
  ModelWeights weights_;
  CpuModel model_;
};

// The step trace says which decode rows carried a fill to the top (plan.fills_complete) and how
// many pending states joined them (the plan's fill groups): each such row gives one pair per
// joined state and one per exit point below the top (the small model has 3 exit points: 2).
TEST_F(AdaptiveThresholdEngine, PairsAreTheCompletedFillStatesAndTheDeepTokensProbes) {
  const EngineRun r =
      run(options_for("deferred_fill", "adaptive_threshold", 0.9), forced_requests(6, 12));
  std::int64_t expected = 0;
  std::int64_t completing_rows = 0;
  for (const StepRecord& step : r.steps) {
    for (const policy::StepRow& row : step.rows) {
      if (row.kind != policy::RowKind::decode || !row.plan.fills_complete)
        continue;
      ++completing_rows;
      for (std::size_t g = 0; g < row.plan.fill_count; ++g)
        expected += row.plan.fills[g].tokens;
      expected += 2;
    }
  }
  ASSERT_GT(completing_rows, 0) << "the run must have synchronized parallel passes";
  EXPECT_EQ(r.calibration_pairs, expected);
  EXPECT_EQ(r.filled_states + 2 * completing_rows, expected);
  // Each pair's flag is recorded on the token it came from (the token trace's agreements).
  std::int64_t flags = 0;
  for (const GeneratedToken& t : r.tokens)
    flags += static_cast<std::int64_t>(t.agreements.size());
  EXPECT_EQ(flags, expected);
}

// With the confidences fixed by teacher forcing, a token leaves at the first exit point whose
// confidence reaches the threshold in force, so under any threshold between the lowest and the
// highest the run used its exit point lies between its exit points under those two fixed
// thresholds (a lower threshold never exits later). The trajectory must move for this to say
// anything beyond the fixed rule.
TEST_F(AdaptiveThresholdEngine, ExitsLieBetweenThoseOfTheFixedThresholdsBracketingIt) {
  const std::vector<EngineRequest> reqs = forced_requests(6, 12);
  const double initial = 0.9;
  const EngineRun adaptive = run(options_for("deferred_fill", "adaptive_threshold", initial), reqs);
  ASSERT_FALSE(adaptive.threshold_trajectory.empty());
  double lowest = initial;
  double highest = initial;
  for (const ThresholdTrajectoryPoint& point : adaptive.threshold_trajectory) {
    lowest = std::min(lowest, point.refit.threshold);
    highest = std::max(highest, point.refit.threshold);
  }
  EXPECT_LT(lowest, highest) << "the threshold never moved";
  const EngineRun low = run(options_for("deferred_fill", "confidence", lowest), reqs);
  const EngineRun high = run(options_for("deferred_fill", "confidence", highest), reqs);
  const auto exit_of = [](const EngineRun& run, const GeneratedToken& t) {
    for (const GeneratedToken& u : run.tokens) {
      if (u.request == t.request && u.position == t.position)
        return u.exit_point;
    }
    return -1;
  };
  for (const GeneratedToken& t : adaptive.tokens) {
    const int at_low = exit_of(low, t);
    const int at_high = exit_of(high, t);
    EXPECT_LE(at_low, t.exit_point) << t.request.value << ":" << t.position;
    EXPECT_LE(t.exit_point, at_high) << t.request.value << ":" << t.position;
  }
  // Exit shares follow: the adaptive run exits early at least as often as the high fixed
  // threshold and at most as often as the low one.
  const auto early = [](const EngineRun& run) {
    return std::count_if(run.tokens.begin(), run.tokens.end(),
                         [](const GeneratedToken& t) { return t.exit_point < 2; });
  };
  EXPECT_LE(early(high), early(adaptive));
  EXPECT_LE(early(adaptive), early(low));
  EXPECT_LT(early(high), early(low)) << "the bracketing thresholds must differ in their exits";
}

// FREE learns only at synchronized parallel decoding: without deferred_fill there are no pairs,
// no refit, and the threshold stays where it started (the CLI says so).
TEST_F(AdaptiveThresholdEngine, TheThresholdStaysOutsideDeferredFill) {
  const std::vector<EngineRequest> reqs = forced_requests(4, 10);
  const EngineRun r = run(options_for("state_copy", "adaptive_threshold", 0.6), reqs);
  EXPECT_EQ(r.calibration_pairs, 0);
  EXPECT_TRUE(r.threshold_trajectory.empty());
  // At its initial threshold it exits exactly as the fixed rule does.
  const EngineRun fixed = run(options_for("state_copy", "confidence", 0.6), reqs);
  ASSERT_EQ(r.tokens.size(), fixed.tokens.size());
  for (std::size_t t = 0; t < r.tokens.size(); ++t)
    EXPECT_EQ(r.tokens[t].exit_point, fixed.tokens[t].exit_point) << t;
}

}  // namespace
}  // namespace exitsim::engine
