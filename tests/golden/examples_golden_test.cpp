// The shipped example scenarios as goldens (SimGrid's examples-as-tests habit): each
// scenarios/examples/*.yaml is simulated as `exitsim simulate` runs it (the base scenario of a
// sweep) and diffed byte for byte against tests/golden/examples/<name>.summary.json and its
// requests.csv digest. The examples that replay the public request traces ($EXITSIM_TRACES, else
// ../shared/traces) are this suite's trace replays; they skip, saying so, when the traces are
// absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "golden/support/golden_files.hpp"
#include "support/test_files.hpp"

namespace exitsim::golden {
namespace {

namespace fs = std::filesystem;

const fs::path k_examples = fs::path("scenarios") / "examples";

std::vector<GoldenCase> example_cases() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(EXITSIM_SOURCE_DIR) / k_examples)) {
    if (entry.path().extension() == ".yaml")
      files.push_back(entry.path().filename());
  }
  std::sort(files.begin(), files.end());
  std::vector<GoldenCase> cases;
  for (const fs::path& file : files) {
    const std::string stem = file.stem().string();
    cases.push_back({stem, k_examples / file, {}, "examples/" + stem});
  }
  return cases;
}

bool reads_the_public_traces(const GoldenCase& golden) {
  const std::string text =
      test_support::read_file((fs::path(EXITSIM_SOURCE_DIR) / golden.scenario).string());
  return text.find("$EXITSIM_TRACES") != std::string::npos;
}

class ExampleGolden : public testing::TestWithParam<GoldenCase> {};

TEST_P(ExampleGolden, MatchesTheCheckedInSummaryAndRequests) {
  if (reads_the_public_traces(GetParam())) {
    const std::string traces = test_support::shared_traces_dir();
    if (!fs::is_directory(traces))
      GTEST_SKIP() << "the public request traces are absent (" << traces << ")";
    // The scenario names its trace as $EXITSIM_TRACES/...: the folder the tests read.
    ::setenv("EXITSIM_TRACES", traces.c_str(), 1);
  }
  const GoldenOutput output = run_golden(GetParam());
  expect_depth_figures_match_the_strategy(output);
  expect_matches_checked_in_files(GetParam(), output);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleGolden, testing::ValuesIn(example_cases()),
                         golden_case_name);

// Every example is a golden: a new example without its files fails above, and this guards
// against the folder being read empty.
TEST(ExampleGoldens, FindTheShippedExamples) {
  EXPECT_GE(example_cases().size(), 7u);
}

}  // namespace
}  // namespace exitsim::golden
