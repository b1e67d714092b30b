#include "exitsim/analysis/sweep.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/support/sqlite_answer.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::sqlite_answer;
using test_support::TempDir;

TEST(SweepPoints, EnumerateTheCartesianProductLastAxisFastest) {
  const std::vector<scenario::SweepAxis> axes = {{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}};
  const std::vector<SweepPoint> points = sweep_points(axes);
  ASSERT_EQ(points.size(), 6U);
  EXPECT_EQ(points[0].key, "a=1; b=x");
  EXPECT_EQ(points[1].key, "a=1; b=y");
  EXPECT_EQ(points[3].key, "a=2; b=x");
  EXPECT_EQ(points[5].overrides, (std::vector<std::string>{"a=2", "b=z"}));
  EXPECT_EQ(points[5].index, 5U);
  const std::vector<SweepPoint> none = sweep_points({});
  ASSERT_EQ(none.size(), 1U);
  EXPECT_TRUE(none[0].overrides.empty());
}

TEST(Shard, ParsesIOfNAndRefusesTheRest) {
  const Shard s = parse_shard("2/4");
  EXPECT_TRUE(s.contains(6));
  EXPECT_FALSE(s.contains(7));
  for (const char* bad : {"4/4", "1", "a/2", "1/0", "-1/2", "1/2/3", ""}) {
    EXPECT_NE(error_of([&] { parse_shard(bad); }).find("--shard: expected i/N"), std::string::npos)
        << bad;
  }
}

SweepOptions small_sweep(const TempDir& dir) {
  SweepOptions options;
  options.scenario_file = dir.write("sweep.yaml",
                                    "workload:\n  requests: 60\n"
                                    "sweep:\n"
                                    "  - key: scheduler.max_running\n    values: [4, 64]\n"
                                    "  - key: workload.arrivals.rate\n    values: [1, 20]\n");
  options.database = dir.path("runs.db");
  options.jobs = 2;
  return options;
}

TEST(RunSweep, StoresEveryPointOnceAndResumes) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  options.shard = parse_shard("1/2");  // points 1 and 3
  EXPECT_EQ(run_sweep(options), 2U);
  options.shard = {};
  std::vector<SweepProgress> seen;
  options.progress = [&](const SweepProgress& p) { seen.push_back(p); };
  EXPECT_EQ(run_sweep(options), 2U);  // only 0 and 2 are left
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().skipped, 2U);
  EXPECT_EQ(seen.back().done, 2U);
  EXPECT_EQ(run_sweep(options), 0U);

  const std::vector<RunRecord> runs = SweepDatabase(options.database).runs();
  ASSERT_EQ(runs.size(), 4U);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].point.index, i);
    EXPECT_GT(runs[i].metrics.throughput_tokens_per_s, 0);
    EXPECT_NE(runs[i].metrics.summary_json.find("throughput_tokens_per_s"), std::string::npos);
  }
  EXPECT_EQ(runs[3].point.overrides,
            (std::vector<std::string>{"scheduler.max_running=64", "workload.arrivals.rate=20"}));
  EXPECT_NE(runs[3].scenario_yaml.find("max_running: 64"), std::string::npos);
  // At 20 requests/s, 4 running sequences make a queue that 64 do not.
  EXPECT_GT(runs[1].metrics.ttft_p99_ms, runs[3].metrics.ttft_p99_ms);

  // The same sweep run again from scratch gives the same numbers (deterministic runs).
  SweepOptions fresh = small_sweep(dir);
  fresh.database = dir.path("again.db");
  fresh.jobs = 1;
  run_sweep(fresh);
  const std::vector<RunRecord> again = SweepDatabase(fresh.database).runs();
  ASSERT_EQ(again.size(), 4U);
  for (std::size_t i = 0; i < again.size(); ++i)
    EXPECT_EQ(again[i].metrics.summary_json, runs[i].metrics.summary_json);
}

// Runs were keyed by the point's overrides only: after an edit of the base scenario a rerun
// printed "0 runs made, 4 already" and kept the old numbers. Now the stored runs are stale.
TEST(RunSweep, AChangedScenarioOrInputFileMakesTheStoredRunsStale) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  std::vector<SweepProgress> seen;
  options.progress = [&](const SweepProgress& p) { seen.push_back(p); };
  EXPECT_EQ(run_sweep(options), 4U);

  options.overrides = {"workload.requests=80"};  // outside the sweep axes
  EXPECT_EQ(run_sweep(options), 4U);
  EXPECT_EQ(seen.back().stale, 4U);
  EXPECT_EQ(seen.back().skipped, 0U);
  std::vector<RunRecord> runs = SweepDatabase(options.database).runs();
  ASSERT_EQ(runs.size(), 4U);  // replaced, not added
  for (const RunRecord& run : runs) {
    EXPECT_NE(run.scenario_yaml.find("requests: 80"), std::string::npos);
    EXPECT_NE(run.metrics.summary_json.find("\"requests\": 80"), std::string::npos);
  }
  EXPECT_EQ(run_sweep(options), 0U);  // unchanged: resumed, nothing stale
  EXPECT_EQ(seen.back().skipped, 4U);
  EXPECT_EQ(seen.back().stale, 0U);

  // An input file the runs read (here a cost table) changes: same text, other content.
  const std::string table = dir.write("costs.csv",
                                      "# exitsim-cost-table v1\nop,batch,time_us\n"
                                      "layer,1,100\nlayer,64,400\nlm_head,1,50\nembedding,1,5\n");
  options.overrides = {"workload.requests=80", "cost_model.kind=table",
                       "cost_model.profile=" + table};
  EXPECT_EQ(run_sweep(options), 4U);
  EXPECT_EQ(run_sweep(options), 0U);
  const double before = SweepDatabase(options.database).runs()[0].metrics.throughput_tokens_per_s;
  dir.write("costs.csv",
            "# exitsim-cost-table v1\nop,batch,time_us\n"
            "layer,1,200\nlayer,64,800\nlm_head,1,50\nembedding,1,5\n");
  EXPECT_EQ(run_sweep(options), 4U);
  EXPECT_EQ(seen.back().stale, 4U);
  EXPECT_LT(SweepDatabase(options.database).runs()[0].metrics.throughput_tokens_per_s, before);
}

TEST(RunSweep, AScenarioErrorLeavesNoDatabaseBehind) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  options.overrides = {"scheduler.max_runing=4"};
  EXPECT_NE(error_of([&] { run_sweep(options); }).find("max_runing"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(options.database));
}

TEST(RunSweep, AFailingPointIsNamed) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  // A KV pool too small for any request fails at every point; the error says which.
  options.overrides = {"scheduler.kv_blocks=1"};
  const std::string error = error_of([&] { run_sweep(options); });
  EXPECT_NE(error.find("at sweep point"), std::string::npos) << error;
}

void execute(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Finding N2: an error from the database writer (the calling thread) unwound past joinable
// worker threads, and std::thread's destructor aborted the process (exit 134, -wal and -shm left
// behind). A trigger fails every insert with the message SQLite gives for a full disk, while four
// workers run eight points: the sweep stops them and ends with the writer's one-line error, and
// the database stays intact, with no run and no file beside it.
TEST(RunSweep, ADatabaseWriteErrorStopsEveryWorkerAndIsOneError) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  options.scenario_file = dir.write("sweep.yaml",
                                    "workload:\n  requests: 60\n"
                                    "sweep:\n"
                                    "  - key: scheduler.max_running\n    values: [4, 8, 16, 64]\n"
                                    "  - key: workload.arrivals.rate\n    values: [1, 20]\n");
  options.jobs = 4;
  { const SweepDatabase created(options.database); }
  execute(options.database,
          "CREATE TRIGGER full BEFORE INSERT ON runs "
          "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END");
  EXPECT_EQ(error_of([&] { run_sweep(options); }),
            options.database +
                ": runs: expected a writable sweep database, found database or disk is full");
  EXPECT_EQ(sqlite_answer(options.database, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(sqlite_answer(options.database, "SELECT COUNT(*) FROM runs"), "0");
  EXPECT_FALSE(std::filesystem::exists(options.database + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(options.database + "-shm"));
}

// The same for an exception from the progress callback, which the writer calls: the workers
// are stopped and joined, the exception reaches the caller, and the runs stored before it stay.
TEST(RunSweep, AnExceptionFromTheProgressCallbackStopsEveryWorker) {
  TempDir dir;
  SweepOptions options = small_sweep(dir);
  options.jobs = 4;
  options.progress = [](const SweepProgress& p) {
    if (p.done == 1)
      throw InputError({"progress", 0, 0, ""}, "stopped by the test");
  };
  EXPECT_EQ(error_of([&] { run_sweep(options); }), "progress: stopped by the test");
  EXPECT_EQ(sqlite_answer(options.database, "SELECT COUNT(*) FROM runs"), "1");
}

TEST(SweepDatabase, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.write("not.db", "this is not SQLite at all, just some text here");
  EXPECT_NE(error_of([&] { SweepDatabase db(path); }).find("not.db"), std::string::npos);
}

// Finding D15: sweep --db on another application's SQLite file added a runs table to it, and a
// report opened any file read-write, creating the table in an empty one.
TEST(SweepDatabase, LeavesOtherDatabasesAndEmptyFilesAlone) {
  TempDir dir;
  const std::string other = dir.path("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE x (a INTEGER)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const auto size = std::filesystem::file_size(other);
  EXPECT_EQ(error_of([&] { SweepDatabase taken(other); }),
            other +
                ": expected a sweep database or a new file, found a database of other tables "
                "(x)");
  EXPECT_EQ(std::filesystem::file_size(other), size);

  const std::string empty = dir.write("empty.db", "");
  EXPECT_EQ(error_of([&] { SweepDatabase read(empty, SweepDatabase::Access::read_only); }),
            empty +
                ": expected a sweep database of `exitsim sweep` (table runs), found no runs "
                "table");
  EXPECT_EQ(std::filesystem::file_size(empty), 0U);
  // A new file for writing is made a sweep database.
  const std::string fresh = dir.path("fresh.db");
  { SweepDatabase made(fresh); }
  EXPECT_TRUE(SweepDatabase(fresh, SweepDatabase::Access::read_only).runs().empty());
}

}  // namespace
}  // namespace exitsim::analysis
