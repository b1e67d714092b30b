#pragma once

// Golden outputs (tests/golden/README.md): a scenario is simulated and its summary JSON and
// requests.csv are compared byte for byte with the files checked in beside it. With
// EXITSIM_UPDATE_GOLDENS=1 the test writes them instead (scripts/update-goldens), so that a
// change of any output is a reviewed diff of these files.

#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"

namespace exitsim::golden {

// The folder of the goldens (tests/golden in the source tree).
std::filesystem::path golden_dir();

// One golden: a scenario file and the --set overrides applied to it.
struct GoldenCase {
  std::string name;                    // test name; letters, digits and '_' only
  std::filesystem::path scenario;      // relative to the source tree's root
  std::vector<std::string> overrides;  // --set key=value, as on the command line
  // The checked-in files' path without extension, relative to golden_dir():
  // <stem>.summary.json and <stem>.requests.fnv1a64.
  std::string stem;
};

// What a golden's run produced, in the form the files hold.
struct GoldenOutput {
  scenario::Scenario scenario;
  std::string summary_json;  // summary.json without its "exitsim" provenance block, 2-space indent
  std::string requests_digest;  // one line: requests.csv's FNV-1a 64, size and rows
};

// gtest prints a case by its files' stem.
void PrintTo(const GoldenCase& golden, std::ostream* out);

// A parameterized golden test's name: the case's.
inline std::string golden_case_name(const testing::TestParamInfo<GoldenCase>& param) {
  return param.param.name;
}

// Loads and simulates the case's scenario as `exitsim simulate` does (relative paths from the
// scenario file's folder, $EXITSIM_TRACES expanded).
GoldenOutput run_golden(const GoldenCase& golden);

// In update mode (EXITSIM_UPDATE_GOLDENS=1) writes the case's files and skips; otherwise fails,
// on the first difference, naming the first differing JSON key with both values and the commands
// that reproduce and regenerate the golden.
void expect_matches_checked_in_files(const GoldenCase& golden, const GoldenOutput& output);

// A golden that says it exercises early exit must show it, so that a golden that slid back to
// full depth cannot pass as an early-exit one: under any strategy but full_depth, with an exit
// policy, the mean exit depth is below the model's full exit depth; batch_sync masks work
// (masked_flops > 0, mean executed depth above the mean exit depth) and deferred_fill fills
// (fill_layers > 0), and no other strategy masks anything. full_depth (or no exit policy)
// stays at the full exit depth. SkipDecode's position schedule gives a batch one depth, so
// batch_sync masks nothing under it.
void expect_depth_figures_match_the_strategy(const GoldenOutput& output);

// The command a reviewer runs to reproduce a golden's summary (from the source tree's root).
std::string reproduce_command(const GoldenCase& golden);

}  // namespace exitsim::golden
