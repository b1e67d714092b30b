// The report's adaptive threshold section (FREE): each adaptive_threshold run's calibration
// pairs, refits and threshold range from its summary, a note for a run whose threshold never
// moved, and one-line errors for a hand-edited summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/analysis/report.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::TempDir;

// Two points below the top of mor-smollm-360m-r3; a fifth of point 1's tokens at or above 0.9.
constexpr const char* k_calibration =
    "# exitsim-calibration-table v1\n"
    "measure,exit_point,confidence_low,confidence_high,tokens,agreeing\n"
    "margin,1,0,0.5,50,10\n"
    "margin,1,0.5,0.9,30,20\n"
    "margin,1,0.9,1,20,19\n"
    "margin,2,0,0.2,80,20\n"
    "margin,2,0.2,1,20,15\n";

// adaptive_threshold under deferred_fill (pairs) and skip_kv (none).
std::vector<RunRecord> adaptive_runs(const TempDir& dir) {
  const std::string table = dir.write("calibration.csv", k_calibration);
  SweepOptions o;
  o.scenario_file = dir.write(
      "sweep.yaml",
      "name: sweep\nmodel:\n  preset: mor-smollm-360m-r3\n"
      "workload:\n  requests: 40\n  input_tokens: {max: 512}\n  output_tokens: {max: 128}\n"
      "exit_policy:\n  kind: adaptive_threshold\n  threshold: 0.9\n"
      "  confidence_measure: margin\n  calibration_table: " +
          table + "\nsweep:\n  - key: sync.strategy\n    values: [deferred_fill, skip_kv]\n");
  o.database = dir.path("runs.db");
  o.jobs = 1;
  run_sweep(o);
  return SweepDatabase(o.database).runs();
}

TEST(ReportAdaptiveThreshold, ShowsEachRunsPairsAndRefitsAndSaysWhenTheThresholdNeverMoved) {
  TempDir dir;
  ReportInputs in;
  in.runs = adaptive_runs(dir);
  ASSERT_EQ(in.runs.size(), 2U);
  const Report r = build_report(in);
  EXPECT_NE(r.html.find("Adaptive threshold (FREE)"), std::string::npos);
  for (const RunRecord& run : in.runs) {
    const nlohmann::json adaptive =
        nlohmann::json::parse(run.metrics.summary_json).at("adaptive_threshold");
    const auto pairs = adaptive.at("pairs").get<std::int64_t>();
    // The table cell the report writes for the run's pairs (fmt {:.4g}: exact below 10,000).
    ASSERT_LT(pairs, 10000);
    EXPECT_NE(r.html.find("<td>" + std::to_string(pairs) + "</td>"), std::string::npos) << pairs;
    const bool never_moved = pairs == 0;
    bool noted = false;
    for (const std::string& note : r.notes)
      noted |= note.starts_with(run.point.key + ": adaptive_threshold collected no calibration");
    EXPECT_EQ(noted, never_moved) << run.point.key;
  }
}

TEST(ReportAdaptiveThreshold, RefusesAHandEditedSummaryInOneLine) {
  TempDir dir;
  ReportInputs in;
  in.runs = adaptive_runs(dir);
  nlohmann::json summary = nlohmann::json::parse(in.runs[0].metrics.summary_json);
  summary["adaptive_threshold"]["trajectory"] = nlohmann::json::array({{{"time_s", "soon"}}});
  in.runs[0].metrics.summary_json = summary.dump();
  EXPECT_EQ(error_of([&] { build_report(in); }),
            "--db: the run " + in.runs[0].point.key +
                ": adaptive_threshold.trajectory[0].time_s: expected a finite number, found "
                "\"soon\"");
}

}  // namespace
}  // namespace exitsim::analysis
