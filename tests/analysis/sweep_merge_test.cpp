// A job array's per-task databases merge into what one process would have written, and the merge
// refuses what is not of the same sweep.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/version.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::TempDir;

SweepOptions sweep_of(const TempDir& dir, const std::string& db, const std::string& rates) {
  SweepOptions options;
  options.scenario_file = dir.write("sweep_" + rates + ".yaml",
                                    "workload:\n  requests: 40\n"
                                    "sweep:\n"
                                    "  - key: scheduler.max_running\n    values: [4, 64]\n"
                                    "  - key: workload.arrivals.rate\n    values: [" +
                                        rates + "]\n");
  options.database = dir.path(db);
  options.jobs = 1;
  return options;
}

TEST(SweepMerge, ShardsMergeIntoWhatOneProcessWrites) {
  TempDir dir;
  std::vector<std::string> shards;
  for (std::size_t i = 0; i < 3; ++i) {
    SweepOptions shard = sweep_of(dir, "shard" + std::to_string(i) + ".db", "1, 20");
    shard.shard = {i, 3};
    run_sweep(shard);
    shards.push_back(shard.database);
  }
  SweepOptions whole = sweep_of(dir, "whole.db", "1, 20");
  run_sweep(whole);
  const std::string merged = dir.path("merged.db");
  EXPECT_EQ(merge_sweep_databases(merged, shards), 4U);
  const std::vector<RunRecord> expected = SweepDatabase(whole.database).runs();
  const std::vector<RunRecord> got = SweepDatabase(merged).runs();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].point.key, expected[i].point.key);
    EXPECT_EQ(got[i].point.digest, expected[i].point.digest);
    EXPECT_EQ(got[i].scenario_yaml, expected[i].scenario_yaml);
    EXPECT_EQ(got[i].setting, expected[i].setting);
    EXPECT_EQ(got[i].metrics.summary_json, expected[i].metrics.summary_json);
  }
  // Provenance: each input file with its shard, one identity, this build.
  const std::vector<SweepProvenance> rows = SweepDatabase(merged).provenance();
  ASSERT_EQ(rows.size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].source, shards[i]);
    EXPECT_EQ(rows[i].shard, std::to_string(i) + "/3");
    EXPECT_EQ(rows[i].identity, rows[0].identity);
    EXPECT_EQ(rows[i].exitsim_commit, std::string(commit()));
  }
  // read_sweep_databases, as report uses it, sees the same runs without a merged file.
  EXPECT_EQ(read_sweep_databases(shards).runs.size(), 4U);
}

TEST(SweepMerge, RefusesAnotherSweepAnExistingOutputAndLeavesNothing) {
  TempDir dir;
  SweepOptions first = sweep_of(dir, "a.db", "1, 20");
  first.shard = {0, 2};
  run_sweep(first);
  SweepOptions other = sweep_of(dir, "b.db", "1, 30");  // another axis value: another sweep
  other.shard = {1, 2};
  run_sweep(other);
  const std::string out = dir.path("out.db");
  const std::string refused = error_of([&] {
    merge_sweep_databases(out, {first.database, other.database});
  });
  EXPECT_EQ(refused.rfind(other.database + ": provenance: expected runs of the sweep in " +
                              first.database + " (identity ",
                          0),
            0U)
      << refused;
  EXPECT_NE(refused.find("merge shards of one sweep only"), std::string::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".merging"));
  EXPECT_EQ(error_of([&] { merge_sweep_databases(first.database, {first.database}); }),
            first.database +
                ": OUT: expected a new file for the merged sweep, found an existing "
                "file");
}

}  // namespace
}  // namespace exitsim::analysis
