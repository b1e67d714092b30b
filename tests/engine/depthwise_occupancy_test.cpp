// Issue 45 point 2, in the engine: on the small recursive CPU model, whatever the exited-token
// mode (and either place a head queue's sequences return to), the shared block never runs more
// sequences in one step than max_running, over random batch limits, exit distributions, arrivals,
// schedulers and K/V budgets; the oracle counts each step's block from its trace rows
// (support/block_occupancy.hpp). Scheduling changes when a token runs, never what it decodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "support/block_occupancy.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

struct Draw {
  EngineOptions options;
  std::vector<EngineRequest> requests;
};

// One random run drawn from `seed` (the same for every mode): the batch limit, the exit
// distribution over the three recursions, the accumulate threshold, the scheduler, the K/V budget
// (every third run tight enough to preempt) and the arrivals (all at 0, or spread over the
// virtual clock's 1 ms steps).
Draw random_draw(std::uint64_t seed) {
  RandomStream draw(seed, "engine_depthwise_occupancy");
  Draw out;
  EngineOptions& o = out.options;
  o.strategy = policy::SyncStrategy::depthwise;
  o.exit_policy.kind = "distribution";
  const double a = draw.uniform_positive();
  const double b = draw.uniform_positive();
  const double c = draw.uniform_positive();
  o.exit_policy.probabilities = {a / (a + b + c), b / (a + b + c), c / (a + b + c)};
  o.seed = seed;
  o.limits.max_running = draw.uniform_int(2, 6);
  o.limits.max_batched_tokens = 64;
  o.depthwise.accumulate_threshold = draw.uniform_int(1, o.limits.max_running);
  o.scheduler = draw.uniform() < 0.5 ? "continuous" : "chunked_prefill";
  o.block_size = 4;
  o.kv_blocks = seed % 3 == 0 ? draw.uniform_int(10, 24) : 512;
  o.honour_arrivals = true;
  o.step_duration = [](const policy::StepTrace&) { return TimeNs{1'000'000}; };
  const bool together = draw.uniform() < 0.5;
  TimeNs t = 0;
  const std::int64_t count = draw.uniform_int(6, 14);
  for (std::int64_t i = 0; i < count; ++i) {
    EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(i));
    if (!together)
      t += static_cast<TimeNs>(draw.exponential(1.0 / 1'500'000.0));  // mean gap 1.5 steps
    r.arrival = t;
    const std::int64_t prompt = draw.uniform_int(2, 12);
    for (std::int64_t k = 0; k < prompt; ++k)
      r.prompt.push_back(static_cast<std::int32_t>(draw.uniform_int(0, 49)));
    r.output_tokens = draw.uniform_int(2, 16);
    out.requests.push_back(std::move(r));
  }
  return out;
}

class EngineDepthwiseOccupancy : public testing::Test {
 protected:
  EngineDepthwiseOccupancy()
      : config_(test_support::small_config(test_support::small_recursive_depth())),
        weights_(test_support::small_weights(config_)),
        model_(config_, weights_) {}

  ModelConfig config_;
  ModelWeights weights_;
  CpuModel model_;
};

TEST_F(EngineDepthwiseOccupancy, TheBlockNeverRunsMoreThanMaxRunningSequences) {
  int full_runs = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const Draw base = random_draw(seed);
    std::vector<std::vector<std::int32_t>> immediate_outputs;
    for (const auto& [exited, ahead] : {std::pair{policy::ExitedTokens::immediate, false},
                                        std::pair{policy::ExitedTokens::accumulate, false},
                                        std::pair{policy::ExitedTokens::head_queue, false},
                                        std::pair{policy::ExitedTokens::head_queue, true}}) {
      EngineOptions options = base.options;
      options.depthwise.exited = exited;
      options.depthwise.returns_ahead_of_waiting = ahead;
      const std::string mode = std::to_string(static_cast<int>(exited)) + (ahead ? " ahead" : "");
      std::int64_t most_in_block = 0;
      options.step_observer = [&](const policy::StepTrace& step) {
        const std::int64_t in_block = exitsim::test_support::block_occupancy(step);
        most_in_block = std::max(most_in_block, in_block);
        EXPECT_LE(in_block, options.limits.max_running)
            << "seed " << seed << " mode " << mode << " step " << step.step;
      };
      Engine engine(model_, options);
      const EngineRun run = engine.run(base.requests);
      for (std::size_t r = 0; r < base.requests.size(); ++r) {
        EXPECT_EQ(static_cast<std::int64_t>(run.outputs[r].size()), base.requests[r].output_tokens);
      }
      full_runs += most_in_block == options.limits.max_running ? 1 : 0;
      // Without a preemption (whose recompute runs every layer) the exits alone decide the
      // tokens: the same outputs whatever the mode.
      if (exited == policy::ExitedTokens::immediate) {
        immediate_outputs = run.preemptions == 0 ? run.outputs : decltype(run.outputs){};
      } else if (run.preemptions == 0 && !immediate_outputs.empty()) {
        EXPECT_EQ(run.outputs, immediate_outputs) << "seed " << seed;
      }
    }
  }
  // Not vacuous: most runs fill the block to its limit.
  EXPECT_GE(full_runs, 32) << "of 48";
}

}  // namespace
}  // namespace exitsim::engine
