// load_scenario_with_overlay: a file of scenario sections (what `calibrate --against` writes) laid
// over a scenario and its --set overrides, key by key.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "support/test_files.hpp"

namespace exitsim::scenario {
namespace {

using test_support::error_of;
using test_support::TempDir;

// The overlay's keys win over the file's and --set's; every key it does not name stays the
// scenario's (memory, the bandwidth efficiency), and the replicas the simulator builds see it.
TEST(ScenarioOverlay, ItsKeysReplaceTheScenariosAndTheRestStays) {
  TempDir dir;
  const std::string scenario =
      dir.write("s.yaml",
                "hardware:\n  preset: h100-sxm\n  memory_gib: 40\n  min_kernel_us: 2\n"
                "cost_model:\n  bandwidth_efficiency: 0.8\n");
  const std::string overlay = dir.write(
      "hw.yaml",
      "# a comment, as calibrate writes them\nhardware:\n  preset: h100-sxm\n  min_kernel_us: 6\n"
      "  decode_attention_floor_us: 25\ncost_model:\n  flops_efficiency: 0.5\n");
  const std::vector<std::string> overrides = {"hardware.min_kernel_us=3",
                                              "hardware.link_latency_us=11"};
  const Scenario s = load_scenario_with_overlay(scenario, overrides, overlay);
  EXPECT_DOUBLE_EQ(s.hardware.spec.kernels.min_kernel_ns, 6'000);  // the overlay's, not 2 or 3
  EXPECT_DOUBLE_EQ(s.hardware.spec.kernels.decode_attention_floor_ns, 25'000);
  EXPECT_DOUBLE_EQ(s.cost_model.flops_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(s.cost_model.bandwidth_efficiency, 0.8);         // the file's
  EXPECT_EQ(s.hardware.spec.interconnect.link_latency, 11'000);     // --set's
  EXPECT_EQ(s.hardware.spec.memory_bytes, std::int64_t{40} << 30);  // the file's
  ASSERT_EQ(s.replica_groups.size(), 1U);
  EXPECT_DOUBLE_EQ(s.replica_groups[0].hardware.spec.kernels.min_kernel_ns, 6'000);
  EXPECT_DOUBLE_EQ(s.replica_groups[0].cost_model.flops_efficiency, 0.5);
  // Without the overlay the same scenario keeps its own values.
  EXPECT_DOUBLE_EQ(load_scenario_file(scenario, overrides).hardware.spec.kernels.min_kernel_ns,
                   3'000);
}

// A bad key or value of the overlay is one line naming the overlay's file, line and column.
TEST(ScenarioOverlay, ItsMistakesNameItsFileAndLine) {
  TempDir dir;
  const std::string scenario = dir.write("s.yaml", "hardware:\n  preset: h100-sxm\n");
  const std::string bad_value = dir.write("v.yaml", "hardware:\n  min_kernel_us: -4\n");
  EXPECT_EQ(error_of([&] {
              load_scenario_with_overlay(scenario, {}, bad_value);
            }).rfind(bad_value + ":2:18: hardware.min_kernel_us: ", 0),
            0U)
      << error_of([&] { load_scenario_with_overlay(scenario, {}, bad_value); });
  const std::string bad_key = dir.write("k.yaml", "hardware:\n  min_kernel: 4\n");
  EXPECT_EQ(error_of([&] {
              load_scenario_with_overlay(scenario, {}, bad_key);
            }).rfind(bad_key + ":2:3: hardware.min_kernel: unknown key", 0),
            0U)
      << error_of([&] { load_scenario_with_overlay(scenario, {}, bad_key); });
  const std::string not_a_map = dir.write("l.yaml", "- hardware\n");
  EXPECT_NE(error_of([&] {
              load_scenario_with_overlay(scenario, {}, not_a_map);
            }).find("expected a mapping of scenario sections"),
            std::string::npos);
}

}  // namespace
}  // namespace exitsim::scenario
