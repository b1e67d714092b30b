// Golden outputs: small scenarios whose summary JSON is checked in (tests/golden/), so any change
// in simulated behaviour shows up in review. Numbers compare with a relative tolerance (1e-9) that
// absorbs last-digit differences between libm implementations and nothing else.
//
// After an intended change, regenerate with
//   EXITSIM_UPDATE_GOLDEN=1 build/<preset>/bin/sim_tests --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exitsim/core/version.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::sim {
namespace {

namespace fs = std::filesystem;
const fs::path k_golden_dir = fs::path(EXITSIM_SOURCE_DIR) / "tests" / "golden";

void expect_close(const nlohmann::json& expected, const nlohmann::json& actual,
                  const std::string& path) {
  if (expected.is_number() && actual.is_number()) {
    const double e = expected.get<double>();
    const double a = actual.get<double>();
    EXPECT_LE(std::abs(a - e), 1e-9 * std::max(1.0, std::abs(e)))
        << path << ": " << e << " vs " << a;
    return;
  }
  ASSERT_EQ(expected.type(), actual.type()) << path;
  if (expected.is_object()) {
    ASSERT_EQ(expected.size(), actual.size()) << path << ": keys differ";
    for (const auto& [key, value] : expected.items()) {
      ASSERT_TRUE(actual.contains(key)) << path << "." << key << " missing";
      expect_close(value, actual[key], path + "." + key);
    }
  } else if (expected.is_array()) {
    ASSERT_EQ(expected.size(), actual.size()) << path << ": lengths differ";
    for (std::size_t i = 0; i < expected.size(); ++i) {
      expect_close(expected[i], actual[i], path + "[" + std::to_string(i) + "]");
    }
  } else {
    EXPECT_EQ(expected, actual) << path;
  }
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, SummaryMatchesCheckedInJson) {
  const fs::path scenario_path = k_golden_dir / (GetParam() + ".yaml");
  const fs::path golden_path = k_golden_dir / (GetParam() + ".summary.json");
  const auto scenario = scenario::load_scenario_file(scenario_path.string());
  const auto workload = make_workload(scenario.workload, scenario.seed);
  // In the summary's own key order, so that a rewritten golden differs from the old one only where
  // the values do.
  nlohmann::ordered_json actual = nlohmann::ordered_json::parse(
      summary_to_json(simulate(simulation_config_from(scenario, ""), *workload).summary));
  // The build that made it is provenance, not behaviour: recorded, and left out of the golden.
  ASSERT_EQ(actual["exitsim"]["commit"], std::string(commit()));
  actual.erase("exitsim");
  if (std::getenv("EXITSIM_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden_path, std::ios::binary) << actual.dump(2) << "\n";
    GTEST_SKIP() << "rewrote " << golden_path;
  }
  std::ifstream in(golden_path, std::ios::binary);
  ASSERT_TRUE(in) << golden_path << " missing; run with EXITSIM_UPDATE_GOLDEN=1 to create it";
  std::ostringstream expected;
  expected << in.rdbuf();
  expect_close(nlohmann::json::parse(expected.str()), nlohmann::json::parse(actual.dump()),
               "summary");
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Golden,
                         testing::Values("small_continuous", "tight_kv_chunked",
                                         "static_small_model"));

}  // namespace
}  // namespace exitsim::sim
