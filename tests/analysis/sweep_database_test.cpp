// Damaged and foreign SQLite files given to `sweep`, `sweep merge` and `report` (findings N2, N9,
// N11 and N15 of the third reliability review): each is refused with one line naming the file,
// and left byte for byte as it was. SQLite's own answers, through the tests' own connection, are
// the oracle for what the files hold.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/support/sqlite_answer.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::read_file;
using test_support::sqlite_answer;
using test_support::TempDir;
using test_support::write_file;

constexpr std::size_t k_page_size = 4096;  // SQLite's default, which the sweep keeps

// Shard `index` of 2 of a 6-point sweep (3 runs), as the findings made them.
SweepOptions shard_of(const TempDir& dir, const std::string& db, std::size_t index) {
  SweepOptions options;
  options.scenario_file = dir.write("sweep.yaml",
                                    "workload:\n  requests: 20\n"
                                    "sweep:\n"
                                    "  - key: scheduler.max_running\n"
                                    "    values: [4, 8, 16, 32, 64, 128]\n");
  options.database = dir.path(db);
  options.shard = {index, 2};
  options.jobs = 1;
  return options;
}

// A copy of `path` with page `page` (from 1) starting with a table-leaf header of impossible
// values, as the findings damaged theirs: d[4096:4108] = b'\x0d' + b'\xff' * 11 for page 2.
std::string damaged_copy(const TempDir& dir, const std::string& path, std::size_t page) {
  std::string bytes = read_file(path);
  const std::size_t at = (page - 1) * k_page_size;
  EXPECT_LE(at + 12, bytes.size()) << "the database has no page " << page;
  bytes.replace(at, 12, "\x0d" + std::string(11, '\xff'));
  const std::string copy = dir.path("page" + std::to_string(page) + ".db");
  write_file(copy, bytes);
  return copy;
}

// The one line every reader gives for a damaged file; what SQLite found comes between.
void expect_damaged(const std::string& error, const std::string& path) {
  const std::string start = path +
                            ": expected an intact SQLite database, found a damaged one "
                            "(integrity_check: ";
  EXPECT_EQ(error.substr(0, start.size()), start) << error;
  EXPECT_TRUE(error.ends_with("); restore it from a copy, or run the sweep again into a new file"))
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

class DamagedSweepDatabase : public testing::Test {
 protected:
  void SetUp() override {
    run_sweep(shard_of(dir_, "a.db", 0));
    run_sweep(shard_of(dir_, "b.db", 1));
    ASSERT_EQ(sqlite_answer(b_, "PRAGMA integrity_check"), "ok");
    pages_ = std::filesystem::file_size(b_) / k_page_size;
    ASSERT_GE(pages_, 6U);
  }
  TempDir dir_;
  std::string a_ = dir_.path("a.db");
  std::string b_ = dir_.path("b.db");
  std::size_t pages_ = 0;
};

// Finding N9: a damaged page ended the rows like the last one, so a damaged shard was merged,
// reported and resumed as a shorter one without a word (and with page 2 damaged, N2, the resumed
// sweep aborted). Every page whose damage SQLite's integrity check finds, pages 2, 3 and 6 of the
// findings among them, is now refused by each reader, and nothing is written into the file.
TEST_F(DamagedSweepDatabase, EveryReaderRefusesItInOneLineAndLeavesItAsItWas) {
  std::vector<std::size_t> refused;
  for (std::size_t page = 2; page <= pages_; ++page) {
    const std::string copy = damaged_copy(dir_, b_, page);
    if (sqlite_answer(copy, "PRAGMA integrity_check") == "ok")
      continue;  // damage SQLite cannot see (text inside a value): not the readers' to find
    refused.push_back(page);
    const std::string bytes = read_file(copy);
    SweepOptions resume = shard_of(dir_, "unused.db", 1);
    resume.database = copy;
    expect_damaged(error_of([&] { run_sweep(resume); }), copy);
    expect_damaged(error_of([&] { SweepDatabase report(copy, SweepDatabase::Access::read_only); }),
                   copy);
    // N15: a damaged provenance page said "found no provenance", as if the file were old.
    expect_damaged(error_of([&] { read_sweep_databases({a_, copy}); }), copy);
    const std::string merged = dir_.path("merged.db");
    expect_damaged(error_of([&] { merge_sweep_databases(merged, {a_, copy}); }), copy);
    EXPECT_FALSE(std::filesystem::exists(merged));
    EXPECT_EQ(read_file(copy), bytes) << "page " << page;
    EXPECT_FALSE(std::filesystem::exists(copy + "-wal")) << "page " << page;
    EXPECT_FALSE(std::filesystem::exists(copy + "-journal")) << "page " << page;
    std::filesystem::remove(copy);
  }
  // The findings' pages: 2 the runs table, 3 its key index, 6 a stored scenario; and 4 the
  // provenance table, whose damage `merge` called "found no provenance" (N15).
  ASSERT_EQ(sqlite_answer(b_, "SELECT rootpage FROM sqlite_master WHERE name='provenance'"), "4");
  for (const std::size_t page : {2U, 3U, 4U, 6U}) {
    EXPECT_NE(std::find(refused.begin(), refused.end(), page), refused.end())
        << "page " << page << " of the findings is not refused";
  }
}

// A read that fails after the check (here a page damaged while the file is open, the change
// counter moved so that SQLite reads it again) is an error naming the file, not the last row.
TEST_F(DamagedSweepDatabase, ARowThatCannotBeReadIsAnErrorNotTheEnd) {
  const SweepDatabase database(b_, SweepDatabase::Access::read_only);
  ASSERT_EQ(database.runs().size(), 3U);
  std::string bytes = read_file(b_);
  bytes.replace(k_page_size, 12, "\x0d" + std::string(11, '\xff'));
  ++bytes[27];  // the file change counter's low byte (header offset 24, big-endian)
  write_file(b_, bytes);
  const std::string expected =
      b_ + ": runs: expected a readable sweep database, found database disk image is malformed";
  EXPECT_EQ(error_of([&] { database.runs(); }), expected);
  EXPECT_EQ(error_of([&] { database.completed_digests(); }), expected);
}

// Finding N11: a refused sweep had switched another application's file to WAL and added a
// provenance table before it found the runs table was not a sweep's. The layout is now checked
// before anything is written: the file is byte-identical after the refusal.
TEST(SweepDatabase, ARefusedSweepLeavesAnotherApplicationsFileByteForByte) {
  TempDir dir;
  for (const std::string& tables :
       {std::string("CREATE TABLE runs (id INTEGER, x TEXT)"),
        std::string(
            "CREATE TABLE runs (key TEXT PRIMARY KEY, point INTEGER NOT NULL, overrides TEXT NOT "
            "NULL, scenario TEXT NOT NULL, throughput_tokens_per_s REAL, goodput_requests_per_s "
            "REAL, slo_attainment REAL, ttft_p50_ms REAL, ttft_p99_ms REAL, tpot_p50_ms REAL, "
            "tpot_p99_ms REAL, e2e_p50_ms REAL, e2e_p99_ms REAL, mean_exit_depth REAL, summary "
            "TEXT NOT NULL); CREATE TABLE provenance (id INTEGER)")}) {
    const std::string app = dir.path("app.db");
    std::filesystem::remove(app);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(app.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, tables.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    const std::string bytes = read_file(app);
    SweepOptions options = shard_of(dir, "unused.db", 0);
    options.database = app;
    const std::string error = error_of([&] { run_sweep(options); });
    EXPECT_EQ(error, tables.find("provenance") == std::string::npos
                         ? app +
                               ": runs: expected a sweep database with the exitsim runs table, "
                               "found no such column: key"
                         : app +
                               ": provenance: expected a sweep database with the exitsim "
                               "provenance table, found no such column: source");
    EXPECT_EQ(read_file(app), bytes) << tables;
    EXPECT_EQ(sqlite_answer(app, "PRAGMA journal_mode"), "delete");
    EXPECT_FALSE(std::filesystem::exists(app + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(app + "-shm"));
  }
}

}  // namespace
}  // namespace exitsim::analysis
