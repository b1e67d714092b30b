// The sweep database's columns come from one table (k_run_metric_columns) and the run's setting:
// every column, enumerated from the table, goes through the database and the MPI ranks' JSON and
// back unchanged; a database from before the setting columns is refused by readers in one line
// and rerun by a sweep. SQLite's answers through the test's own connection are the oracle for
// what the file holds.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include "analysis/support/sqlite_answer.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::sqlite_answer;
using test_support::TempDir;

const RunMetricColumn& k_last_metric = *std::prev(std::end(k_run_metric_columns));

// A run whose every metric differs from every other (metric i holds 10 + i + 0.25), so that a
// column read into another member shows; the last metric is NaN (a percentile of no requests).
RunRecord distinct_run() {
  RunRecord run;
  run.point = {3, {"exit_policy.threshold=0.5", "sync.strategy=skip_kv"}, "k", "digest3", {}};
  run.scenario_yaml = "name: x\n";
  run.setting = {"router_expert_choice", std::nullopt, "", {0.5, 0.25}, "skip_kv", 16};
  double value = 10.25;
  for (const RunMetricColumn& column : k_run_metric_columns)
    run.metrics.*column.member = value++;
  run.metrics.*k_last_metric.member = std::numeric_limits<double>::quiet_NaN();
  run.metrics.summary_json = "{}";
  return run;
}

void expect_same_run(const RunRecord& got, const RunRecord& want) {
  EXPECT_EQ(got.point.index, want.point.index);
  EXPECT_EQ(got.point.overrides, want.point.overrides);
  EXPECT_EQ(got.point.key, want.point.key);
  EXPECT_EQ(got.point.digest, want.point.digest);
  EXPECT_EQ(got.scenario_yaml, want.scenario_yaml);
  EXPECT_EQ(got.setting, want.setting);
  for (const RunMetricColumn& column : k_run_metric_columns) {
    const double a = got.metrics.*column.member;
    const double b = want.metrics.*column.member;
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << column.name << ": " << a;
  }
  EXPECT_EQ(got.metrics.summary_json, want.metrics.summary_json);
}

TEST(RunMetricColumns, EveryColumnOfTheTableRoundTripsThroughTheDatabaseAndJson) {
  TempDir dir;
  const std::string path = dir.path("runs.db");
  const RunRecord run = distinct_run();
  {
    SweepDatabase database(path);
    database.record(run);
  }
  // The file has a column of each name in the table, holding that metric's value.
  double value = 10.25;
  for (const RunMetricColumn& column : k_run_metric_columns) {
    const std::string stored =
        sqlite_answer(path, "SELECT " + std::string(column.name) + " FROM runs");
    // SQLite stores a NaN as NULL, which the test's connection reads as "".
    EXPECT_EQ(stored, &column == &k_last_metric
                          ? ""
                          : sqlite_answer(path, "SELECT " + std::to_string(value)))
        << column.name;
    ++value;
  }
  const SweepDatabase reader(path, SweepDatabase::Access::read_only);
  ASSERT_EQ(reader.runs().size(), 1U);
  expect_same_run(reader.runs().front(), run);
  expect_same_run(run_record_from_json(run_record_to_json(run)), run);
}

TEST(RunMetricColumns, RunMetricsOfTakesEachColumnFromItsSummaryField) {
  sim::MetricsSummary s;
  s.throughput_tokens_per_s = 1;
  s.goodput_requests_per_s = 2;
  s.slo_attainment = 3;
  s.ttft.p50 = 4;
  s.ttft.p99 = 5;
  s.tpot.p50 = 6;
  s.tpot.p99 = 7;
  s.e2e.p50 = 8;
  s.e2e.p99 = 9;
  s.depth.mean_exit_depth = 10;
  const RunMetrics m = run_metrics_of(s);
  EXPECT_EQ(m.throughput_tokens_per_s, 1);
  EXPECT_EQ(m.goodput_requests_per_s, 2);
  EXPECT_EQ(m.slo_attainment, 3);
  EXPECT_EQ(m.ttft_p50_ms, 4);
  EXPECT_EQ(m.ttft_p99_ms, 5);
  EXPECT_EQ(m.tpot_p50_ms, 6);
  EXPECT_EQ(m.tpot_p99_ms, 7);
  EXPECT_EQ(m.e2e_p50_ms, 8);
  EXPECT_EQ(m.e2e_p99_ms, 9);
  EXPECT_EQ(m.mean_exit_depth, 10);
  EXPECT_EQ(find_run_metric("tpot_p99_ms")->member, &RunMetrics::tpot_p99_ms);
  EXPECT_EQ(find_run_metric("no_such_metric"), nullptr);
}

// Each field only where the schema applies its key: what the report placed runs by when it read
// them from the rendered YAML, which holds only the keys that apply.
TEST(RunSetting, TakesEachFieldOnlyWhereItsKeyApplies) {
  scenario::Scenario s;
  s.exit_policy = {};
  s.exit_policy.kind = "confidence";
  s.exit_policy.threshold = 0.7;
  s.exit_policy.confidence_measure = "margin";
  s.exit_policy.capacities = {0.5};
  s.sync.strategy = "deferred_fill";
  s.scheduler.max_running = 32;
  EXPECT_EQ(run_setting_of(s), (RunSetting{"confidence", 0.7, "margin", {}, "deferred_fill", 32}));

  s.exit_policy.kind = "router_expert_choice";
  s.exit_policy.router_mode = "threshold";
  EXPECT_EQ(run_setting_of(s),
            (RunSetting{"router_expert_choice", 0.7, "", {}, "deferred_fill", 32}));
  s.exit_policy.router_mode = "top_k";
  EXPECT_EQ(run_setting_of(s),
            (RunSetting{"router_expert_choice", std::nullopt, "", {0.5}, "deferred_fill", 32}));

  s.exit_policy.kind = "oracle";
  EXPECT_EQ(run_setting_of(s), (RunSetting{"oracle", std::nullopt, "", {}, "deferred_fill", 32}));
}

// A database written before runs carried their setting (the layout with the digest, as exitsim
// wrote it until then), with one run.
std::string older_database(const TempDir& dir) {
  const std::string path = dir.path("old.db");
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql =
      "CREATE TABLE runs (key TEXT PRIMARY KEY, point INTEGER NOT NULL, overrides TEXT NOT "
      "NULL, scenario TEXT NOT NULL, throughput_tokens_per_s REAL, goodput_requests_per_s "
      "REAL, slo_attainment REAL, ttft_p50_ms REAL, ttft_p99_ms REAL, tpot_p50_ms REAL, "
      "tpot_p99_ms REAL, e2e_p50_ms REAL, e2e_p99_ms REAL, mean_exit_depth REAL, summary "
      "TEXT NOT NULL, digest TEXT NOT NULL DEFAULT '');"
      "INSERT INTO runs (key, point, overrides, scenario, summary, digest) VALUES "
      "('k', 0, '', 'name: x', '{}', 'abc')";
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  return path;
}

TEST(RunSetting, ADatabaseFromBeforeTheSettingColumnsIsRefusedByReadersInOneLine) {
  TempDir dir;
  const std::string path = older_database(dir);
  EXPECT_EQ(error_of([&] { SweepDatabase(path, SweepDatabase::Access::read_only); }),
            path +
                ": runs: expected a sweep database with the columns digest, "
                "throughput_tokens_per_s, goodput_requests_per_s, slo_attainment, ttft_p50_ms, "
                "ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, e2e_p50_ms, e2e_p99_ms, mean_exit_depth, "
                "exit_policy, exit_threshold, confidence_measure, exit_capacities, sync_strategy, "
                "max_running, found one without exit_policy, exit_threshold, confidence_measure, "
                "exit_capacities, sync_strategy, max_running, written by an older exitsim; run "
                "`exitsim sweep SCENARIO --db " +
                path + "` with this exitsim (it reruns the runs stored without their setting)");
}

// A sweep opening it adds the columns; its run, stored without a setting, reads as stale (digest
// "") so that the sweep runs it again, and until then a reader names it.
TEST(RunSetting, ASweepAddsTheColumnsAndRerunsTheRunsStoredWithoutThem) {
  TempDir dir;
  const std::string path = older_database(dir);
  {
    const SweepDatabase database(path);
    EXPECT_EQ(database.completed_digests(), (std::map<std::string, std::string>{{"k", ""}}));
  }
  EXPECT_EQ(sqlite_answer(path, "SELECT COUNT(*) FROM pragma_table_info('runs')"), "22");
  const SweepDatabase reader(path, SweepDatabase::Access::read_only);
  EXPECT_EQ(error_of([&] { reader.runs(); }),
            path +
                ": runs.exit_policy: expected the run's setting, found none for run \"k\", stored "
                "by an older exitsim; run `exitsim sweep SCENARIO --db " +
                path + "` with this exitsim (it reruns the runs stored without their setting)");
}

}  // namespace
}  // namespace exitsim::analysis
