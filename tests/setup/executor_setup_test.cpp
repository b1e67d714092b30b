// The one scenario adapter (exitsim/setup): what both executors take from a scenario.
#include "exitsim/setup/executor_setup.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/setup/host_swap.hpp"
#include "exitsim/setup/policy_params.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::setup {
namespace {

namespace fs = std::filesystem;

// A model of 2 K/V heads of 32 dimensions, blocks of 8 tokens, 1 MiB of host swap space, a host
// link of 1 GB/s: the figures the worked examples below use.
scenario::Scenario swap_scenario(const std::string& dtype) {
  const std::vector<std::string> overrides = {"model.n_kv_heads=2",
                                              "model.n_heads=8",
                                              "model.head_dim=32",
                                              "model.d_model=256",
                                              "model.dtype=" + dtype,
                                              "scheduler.block_size=8",
                                              "scheduler.preemption=swap",
                                              "hardware.host_swap_gb=0.0009765625",
                                              "hardware.host_link_bandwidth_gbps=1"};
  return scenario::load_default_scenario(overrides);
}

// Issue 44: `exitsim engine run` sized the host tier for fp32 K/V whatever the model's dtype, so
// that the engine's tier of a bf16 model was half the simulator's. One sizing now serves both.
TEST(HostSwapTier, IsSizedInTheModelsDtype) {
  // bf16: a pool block is K and V (2) x 2 heads x 32 dimensions x 8 tokens x 2 bytes = 2,048
  // bytes; 1 MiB = 1,048,576 bytes holds 512 of them, and each takes 2,048 ns at 1 GB/s.
  const ExecutorSetup bf16 = executor_setup(swap_scenario("bf16"));
  ASSERT_TRUE(bf16.host_swap.has_value());
  EXPECT_EQ(bf16.host_swap->bytes_per_block, 2048);
  EXPECT_EQ(bf16.host_swap->host_blocks, 512);
  EXPECT_DOUBLE_EQ(bf16.host_swap->ns_per_block, 2048.0);
  EXPECT_EQ(bf16.host_swap->transfer(3), 6144);
  // fp32 doubles the bytes and halves the blocks (the figure the CLI used for every dtype).
  const ExecutorSetup fp32 = executor_setup(swap_scenario("fp32"));
  EXPECT_EQ(fp32.host_swap->host_blocks, 256);
  // Without swap preemption there is no tier.
  scenario::Scenario recompute = swap_scenario("bf16");
  recompute.replica_groups.front().scheduler.preemption = "recompute";
  EXPECT_FALSE(executor_setup(recompute).host_swap.has_value());
}

TEST(HostSwapTier, NeedsAHostLink) {
  scenario::Scenario s = swap_scenario("bf16");
  s.replica_groups.front().hardware.spec.host_link_bandwidth = 0;
  try {
    (void)executor_setup(s);
    FAIL() << "no host link accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hardware.host_link_bandwidth_gbps"), std::string::npos)
        << e.what();
  }
}

class ReplaySetup : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("exitsim_setup_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A token trace of the given (request, position, exit point) rows.
  std::string trace(const std::string& name, const std::vector<std::array<int, 3>>& rows) const {
    const std::string path = (dir_ / name).string();
    traces::TokenTraceWriter writer(path);
    for (const auto& [request, position, exit_point] : rows) {
      traces::TokenTraceRow row;
      row.request_id = static_cast<std::uint64_t>(request);
      row.position = position;
      row.exit_point = exit_point;
      row.exit_depth = 8 * (exit_point + 1);
      row.policy = "confidence";
      writer.write(row);
    }
    writer.finish();
    return path;
  }

  // The default model with exits after layers 8, 16, 24 and 32 (exit points 0 to 3).
  static scenario::Scenario replay(const std::string& path, const std::string& strategy) {
    const std::vector<std::string> overrides = {
        "model.depth.exit_points=[8, 16, 24, 32]", "sync.strategy=" + strategy,
        "exit_policy={kind: replay, token_trace: \"" + path + "\"}"};
    return scenario::load_default_scenario(overrides);
  }

  fs::path dir_;
};

// Issue 44: `exitsim engine run` with a replay policy stopped with an internal error because no
// lookup was attached. The adapter attaches it: each (request, position) answers its row's exit.
TEST_F(ReplaySetup, AttachesTheTokenTracesExits) {
  const ExecutorSetup setup =
      executor_setup(replay(trace("t.csv", {{0, 0, 3}, {0, 1, 1}, {5, 0, 0}}), "state_copy"));
  ASSERT_TRUE(static_cast<bool>(setup.exit_policy.replay_lookup));
  EXPECT_EQ(setup.exit_policy.replay_lookup(RequestId(0), 0), 3);
  EXPECT_EQ(setup.exit_policy.replay_lookup(RequestId(0), 1), 1);
  EXPECT_EQ(setup.exit_policy.replay_lookup(RequestId(5), 0), 0);
  EXPECT_EQ(setup.exit_policy.replay_lookup(RequestId(5), 1), std::nullopt);
  EXPECT_EQ(setup.strategy, policy::SyncStrategy::state_copy);
}

TEST_F(ReplaySetup, RefusesATraceOfAnotherModelNamingItsLine) {
  // Exit point 4 on the third row (line 5: the version line and the header come first); the
  // model has exit points 0 to 3.
  const std::string path = trace("other.csv", {{0, 0, 3}, {0, 1, 1}, {0, 2, 4}});
  try {
    (void)executor_setup(replay(path, "state_copy"));
    FAIL() << "a trace of another model accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ":5: exit_point: expected an exit point index in [0, 3] (the model has 4 "
                  "exit points), found 4");
  }
}

TEST_F(ReplaySetup, ReadsNoTraceUnderFullDepth) {
  // full_depth is the baseline in which nobody exits: its trace is never read, even a missing one.
  const ExecutorSetup setup = executor_setup(replay((dir_ / "absent.csv").string(), "full_depth"));
  EXPECT_FALSE(static_cast<bool>(setup.exit_policy.replay_lookup));
  EXPECT_THROW((void)executor_setup(replay((dir_ / "absent.csv").string(), "skip_kv")), InputError);
}

TEST(StrategyNamed, ParsesOnceAndNamesTheField) {
  EXPECT_EQ(strategy_named("depthwise", "--strategies"), policy::SyncStrategy::depthwise);
  try {
    (void)strategy_named("sideways", "--strategies");
    FAIL() << "an unknown strategy accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--strategies: expected one of ", 0), 0U) << message;
    EXPECT_NE(message.find("found \"sideways\""), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace exitsim::setup
