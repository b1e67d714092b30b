#include "golden/support/golden_files.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "exitsim/core/random.hpp"
#include "exitsim/core/version.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/test_files.hpp"

namespace exitsim::golden {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* k_update_variable = "EXITSIM_UPDATE_GOLDENS";
constexpr const char* k_regenerate = "scripts/update-goldens (tests/golden/README.md)";

bool updating() {
  const char* set = std::getenv(k_update_variable);
  return set != nullptr && std::string(set) == "1";
}

std::string requests_digest(const std::string& csv) {
  std::int64_t rows = -1;  // the header is not a request
  for (const char c : csv)
    rows += c == '\n' ? 1 : 0;
  return fmt::format("requests.csv fnv1a64 {:016x} bytes {} rows {}\n", fnv1a_64(csv), csv.size(),
                     rows);
}

std::string value_text(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The first place (in document order) where `actual` differs from `expected`, key order
// included, since the files compare byte for byte; nullopt when the documents are equal.
std::optional<std::string> first_difference(const Json& expected, const Json& actual,
                                            const std::string& path) {
  if (expected.type() != actual.type() || !(expected.is_object() || expected.is_array())) {
    if (expected == actual)
      return std::nullopt;
    return fmt::format("{}: golden {}, now {}", path, value_text(expected), value_text(actual));
  }
  if (expected.is_array()) {
    for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
      if (auto found = first_difference(expected[i], actual[i], fmt::format("{}[{}]", path, i)))
        return found;
    }
    if (expected.size() != actual.size()) {
      return fmt::format("{}: golden has {} entries, now {}", path, expected.size(), actual.size());
    }
    return std::nullopt;
  }
  auto e = expected.items().begin();
  auto a = actual.items().begin();
  for (; e != expected.items().end() && a != actual.items().end(); ++e, ++a) {
    if (e.key() != a.key())
      return fmt::format("{}: golden has key \"{}\" here, now \"{}\"", path, e.key(), a.key());
    if (auto found = first_difference(e.value(), a.value(), path + "." + e.key()))
      return found;
  }
  if (e != expected.items().end())
    return fmt::format("{}.{}: in the golden, missing now", path, e.key());
  if (a != actual.items().end())
    return fmt::format("{}.{}: new, not in the golden", path, a.key());
  return std::nullopt;
}

}  // namespace

fs::path golden_dir() {
  return fs::path(EXITSIM_SOURCE_DIR) / "tests" / "golden";
}

GoldenOutput run_golden(const GoldenCase& golden) {
  const fs::path scenario_path = fs::path(EXITSIM_SOURCE_DIR) / golden.scenario;
  GoldenOutput output{
      scenario::load_scenario_file(scenario_path.string(), golden.overrides), {}, {}};
  const test_support::TempDir scratch;
  sim::SimulationConfig config = sim::simulation_config_from(output.scenario, "");
  config.requests_csv_path = scratch.path("requests.csv");
  const auto workload = sim::make_workload(output.scenario.workload, output.scenario.seed);
  Json summary = Json::parse(sim::summary_to_json(sim::simulate(config, *workload).summary));
  // The build that made it is provenance, not behaviour: recorded, and left out of the golden.
  EXPECT_EQ(summary["exitsim"]["commit"], std::string(commit()));
  summary.erase("exitsim");
  output.summary_json = summary.dump(2) + "\n";
  output.requests_digest = requests_digest(test_support::read_file(config.requests_csv_path));
  return output;
}

void PrintTo(const GoldenCase& golden, std::ostream* out) {
  *out << golden.stem;
}

std::string reproduce_command(const GoldenCase& golden) {
  std::string command = "build/release/bin/exitsim simulate " + golden.scenario.generic_string();
  for (const std::string& set : golden.overrides)
    command += " --set '" + set + "'";
  return command + " --out OUT  # OUT/summary.json less its \"exitsim\" block; OUT/requests.csv";
}

void expect_matches_checked_in_files(const GoldenCase& golden, const GoldenOutput& output) {
  const fs::path summary_path = golden_dir() / (golden.stem + ".summary.json");
  const fs::path digest_path = golden_dir() / (golden.stem + ".requests.fnv1a64");
  if (updating()) {
    fs::create_directories(summary_path.parent_path());
    test_support::write_file(summary_path.string(), output.summary_json);
    test_support::write_file(digest_path.string(), output.requests_digest);
    GTEST_SKIP() << "rewrote " << summary_path << " and " << digest_path;
  }
  const std::string how = fmt::format("\n  reproduce:  {}\n  regenerate: {} (then review the diff)",
                                      reproduce_command(golden), k_regenerate);
  ASSERT_TRUE(fs::exists(summary_path) && fs::exists(digest_path))
      << summary_path << " or " << digest_path << " missing" << how;
  const std::string expected = test_support::read_file(summary_path.string());
  if (expected != output.summary_json) {
    const std::optional<std::string> where =
        first_difference(Json::parse(expected), Json::parse(output.summary_json), "summary");
    FAIL() << summary_path.filename().string() << " differs at "
           << where.value_or("no key (only the bytes: spacing or number formatting)") << how;
  }
  const std::string expected_digest = test_support::read_file(digest_path.string());
  EXPECT_EQ(expected_digest, output.requests_digest)
      << digest_path.filename().string() << ": the summary matches, requests.csv does not" << how;
}

void expect_depth_figures_match_the_strategy(const GoldenOutput& output) {
  const scenario::Scenario& s = output.scenario;
  const Json summary = Json::parse(output.summary_json);
  ASSERT_TRUE(summary.contains("depth")) << "no depth section";
  const Json& depth = summary["depth"];
  const double full = s.model.shape.depth.effective_exit_points().back();
  const double exit_depth = depth["mean_exit_depth"].get<double>();
  const double executed = depth["mean_executed_depth"].get<double>();
  const double masked = depth["masked_flops"].get<double>();
  const std::string& strategy = s.sync.strategy;
  SCOPED_TRACE("strategy " + strategy + ", exit policy " + s.exit_policy.kind);
  if (strategy == "full_depth" || s.exit_policy.kind == "none") {
    EXPECT_EQ(exit_depth, full);
    EXPECT_EQ(masked, 0.0);
    return;
  }
  EXPECT_LT(exit_depth, full) << "an early-exit golden at full depth";
  // SkipDecode's schedule gives the whole batch one depth: batch_sync has nothing to mask.
  if (strategy == "batch_sync" && s.exit_policy.kind != "position_schedule") {
    EXPECT_TRUE(masked > 0.0 && executed > exit_depth)
        << "batch_sync masked nothing: masked_flops " << masked << ", mean executed depth "
        << executed << ", mean exit depth " << exit_depth;
  } else {
    EXPECT_EQ(masked, 0.0);
  }
  if (strategy == "deferred_fill") {
    EXPECT_GT(depth["fill_layers"].get<double>(), 0.0);
  }
}

}  // namespace exitsim::golden
