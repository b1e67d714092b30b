#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <string_view>

#include "exitsim/analysis/sweep.hpp"
#include "exitsim/core/error.hpp"
#include "sweep_run_columns.hpp"

namespace exitsim::analysis {

namespace {

constexpr const char* k_provenance_schema =
    "CREATE TABLE IF NOT EXISTS provenance ("
    " source TEXT NOT NULL, identity TEXT NOT NULL, shard TEXT NOT NULL,"
    " exitsim_version TEXT NOT NULL, exitsim_commit TEXT NOT NULL,"
    " UNIQUE (source, identity, shard, exitsim_version, exitsim_commit))";

constexpr const char* k_provenance_columns =
    "source, identity, shard, exitsim_version, exitsim_commit";

class Statement {
 public:
  Statement(sqlite3* db, const char* sql, const std::string& path) : path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr) != SQLITE_OK)
      fail(db, "a sweep database with the exitsim runs table");
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  [[noreturn]] void fail(sqlite3* db, const std::string& expected) const {
    throw InputError({path_, 0, 0, "runs"}, expected_found(expected, sqlite3_errmsg(db)));
  }
  // Steps to the next row: true at a row, false after the last one. Any other result (a damaged
  // page, an I/O error) is an error: read as the end of the rows, it made a damaged database
  // look like a shorter one (merged, reported and resumed without a word).
  bool next_row(sqlite3* db) {
    const int result = sqlite3_step(statement_);
    if (result == SQLITE_ROW)
      return true;
    if (result == SQLITE_DONE)
      return false;
    fail(db, "a readable sweep database");
  }
  // The first column of the one row a COUNT(*) query gives.
  std::int64_t count(sqlite3* db) {
    if (!next_row(db))
      fail(db, "a readable sweep database");
    return sqlite3_column_int64(statement_, 0);
  }
  sqlite3_stmt* get() const { return statement_; }
  void text(int column, const std::string& value) {
    sqlite3_bind_text(statement_, column, value.c_str(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
  }
  std::string text_at(int column) const {
    const auto* p = sqlite3_column_text(statement_, column);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  std::string path_;
  sqlite3_stmt* statement_ = nullptr;
};

}  // namespace

struct SweepDatabase::Impl {
  std::string path;
  sqlite3* db = nullptr;
  bool writable = false;

  // Closing here rather than in ~SweepDatabase also covers a constructor that throws after
  // the open succeeded: the members of a half-built object are still destroyed.
  ~Impl() {
    if (db != nullptr)
      sqlite3_close(db);
  }

  void exec(const char* sql, const std::string& expected) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string found = message != nullptr ? message : sqlite3_errmsg(db);
      sqlite3_free(message);
      throw InputError({path, 0, 0, "runs"}, expected_found(expected, found));
    }
  }
  void add_later_columns();
};

namespace {

// The names of the file's tables other than runs, comma-separated ("" when none).
std::string other_tables(sqlite3* db, const std::string& path) {
  Statement tables(db,
                   "SELECT name FROM sqlite_master WHERE type='table' AND name NOT IN ('runs', "
                   "'provenance')",
                   path);
  std::string names;
  while (tables.next_row(db))
    names += (names.empty() ? "" : ", ") + tables.text_at(0);
  return names;
}

bool has_table(sqlite3* db, const std::string& path, const std::string& name) {
  Statement table(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?1", path);
  table.text(1, name);
  return table.count(db) > 0;
}

// Refuses a damaged file before anything reads rows from it or writes to it. integrity_check
// rather than quick_check: it also finds an index that disagrees with its table (a damaged index
// page), and costs little at sweep sizes (docs/cluster_sweeps.md). (1): the first problem only,
// for a one-line error.
void check_intact(sqlite3* db, const std::string& path) {
  Statement check(db, "PRAGMA integrity_check(1)", path);
  const int result = sqlite3_step(check.get());
  std::string found;
  if (result == SQLITE_ROW) {
    found = check.text_at(0);
    if (found == "ok")
      return;
  } else {
    found = sqlite3_errmsg(db);
  }
  for (char& c : found) {
    if (c == '\n')
      c = ' ';
  }
  throw InputError({path, 0, 0, ""},
                   expected_found("an intact SQLite database",
                                  "a damaged one (integrity_check: " + found +
                                      "); restore it from a copy, or run the sweep again into "
                                      "a new file"));
}

// Refuses a file whose `table` lacks one of `columns`, naming the table.
void expect_columns(sqlite3* db, const std::string& path, const std::string& table,
                    const std::string& columns) {
  sqlite3_stmt* probe = nullptr;
  const std::string sql = fmt::format("SELECT {} FROM {} LIMIT 0", columns, table);
  const int result = sqlite3_prepare_v2(db, sql.c_str(), -1, &probe, nullptr);
  sqlite3_finalize(probe);
  if (result != SQLITE_OK) {
    throw InputError({path, 0, 0, table},
                     expected_found("a sweep database with the exitsim " + table + " table",
                                    sqlite3_errmsg(db)));
  }
}

// A database written by another application, or by a sweep of another layout, would take rows
// it cannot hold or lose its own: its layout is checked before this process changes anything in
// the file (journal mode, tables), so that a refused file is left byte for byte as it was.
void check_layout(sqlite3* db, const std::string& path, bool has_runs) {
  if (has_runs)
    expect_columns(db, path, "runs", run_columns::first_column_list());
  if (has_table(db, path, "provenance"))
    expect_columns(db, path, "provenance", k_provenance_columns);
}

bool has_runs_column(sqlite3* db, const std::string& path, const std::string& name) {
  Statement column(db, "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name=?1", path);
  column.text(1, name);
  return column.count(db) > 0;
}

// The later columns (run_columns::later_columns) the file's runs table lacks, comma-separated.
std::string missing_later_columns(sqlite3* db, const std::string& path) {
  std::string missing;
  for (const run_columns::Column& c : run_columns::later_columns()) {
    if (!has_runs_column(db, path, c.name))
      missing += (missing.empty() ? "" : ", ") + c.name;
  }
  return missing;
}

// A reader cannot add what an older sweep did not store: it says what to do.
void check_later_columns(sqlite3* db, const std::string& path) {
  const std::string missing = missing_later_columns(db, path);
  if (!missing.empty()) {
    throw InputError(
        {path, 0, 0, "runs"},
        expected_found("a sweep database with the columns " + run_columns::later_column_list(),
                       "one without " + missing + ", written by an older exitsim; " +
                           run_columns::older_database_advice(path)));
  }
}

}  // namespace

// A sweep resuming a file of an older layout adds the columns it lacks; its rows hold NULL (or
// the column's default) there, and those without a setting are rerun as stale.
void SweepDatabase::Impl::add_later_columns() {
  for (const run_columns::Column& c : run_columns::later_columns()) {
    if (!has_runs_column(db, path, c.name)) {
      exec(fmt::format("ALTER TABLE runs ADD COLUMN {} {}", c.name, c.declaration).c_str(),
           "a sweep database (table runs)");
    }
  }
}

SweepDatabase::SweepDatabase(const std::string& path, Access access)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  const bool read_only = access == Access::read_only;
  const int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (sqlite3_open_v2(path.c_str(), &impl_->db, flags, nullptr) != SQLITE_OK) {
    const std::string found = impl_->db != nullptr ? sqlite3_errmsg(impl_->db) : "no database";
    sqlite3_close(impl_->db);
    impl_->db = nullptr;
    throw InputError({path, 0, 0, ""}, expected_found(read_only ? "a readable SQLite database"
                                                                : "a writable SQLite database",
                                                      found));
  }
  sqlite3_busy_timeout(impl_->db, 10000);  // shards of one sweep may share the file
  check_intact(impl_->db, path);
  // Another application's database is not taken over, and report reads without writing.
  const bool has_runs = has_table(impl_->db, path, "runs");
  if (!has_runs) {
    const std::string others = other_tables(impl_->db, path);
    if (read_only || !others.empty()) {
      throw InputError(
          {path, 0, 0, ""},
          expected_found(
              read_only ? "a sweep database of `exitsim sweep` (table runs)"
                        : "a sweep database or a new file",
              others.empty() ? "no runs table" : "a database of other tables (" + others + ")"));
    }
  }
  check_layout(impl_->db, path, has_runs);
  if (read_only) {
    check_later_columns(impl_->db, path);
    Statement probe(impl_->db,
                    fmt::format("SELECT {} FROM runs LIMIT 0", run_columns::column_list()).c_str(),
                    path);
    return;
  }
  impl_->writable = true;
  impl_->exec("PRAGMA journal_mode=WAL", "a SQLite database");
  // Each point is its own transaction, so that a killed sweep keeps every point it stored. In WAL
  // mode that survives the process dying at any moment without syncing the disk per point; only
  // a machine's crash can lose the last points (never the file), which a rerun makes again.
  impl_->exec("PRAGMA synchronous=NORMAL", "a SQLite database");
  impl_->exec(run_columns::create_table_sql().c_str(), "a sweep database (table runs)");
  impl_->exec(k_provenance_schema, "a sweep database (table provenance)");
  impl_->add_later_columns();
  // A database of another layout would take rows it cannot hold: check every column is there.
  Statement probe(impl_->db,
                  fmt::format("SELECT {} FROM runs LIMIT 0", run_columns::column_list()).c_str(),
                  path);
}

SweepDatabase::~SweepDatabase() {
  // Back to one file when this was the last writer: a finished sweep's database then reads
  // without the -wal and -shm files a WAL database makes even for a reader. While another shard
  // holds it the change is refused (busy), harmlessly, and the last one to close makes it.
  if (impl_ && impl_->db != nullptr && impl_->writable) {
    sqlite3_busy_timeout(impl_->db, 0);
    sqlite3_exec(impl_->db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
  }
}

std::map<std::string, std::string> SweepDatabase::completed_digests() const {
  Statement select(impl_->db, run_columns::stale_digest_sql().c_str(), impl_->path);
  std::map<std::string, std::string> digests;
  while (select.next_row(impl_->db))
    digests.emplace(select.text_at(0), select.text_at(1));
  return digests;
}

void SweepDatabase::record(const RunRecord& run) {
  Statement insert(impl_->db, run_columns::insert_sql().c_str(), impl_->path);
  run_columns::bind_run(insert.get(), run);
  // One statement outside a transaction is its own atomic transaction: a kill leaves the row
  // whole or absent.
  if (sqlite3_step(insert.get()) != SQLITE_DONE)
    insert.fail(impl_->db, "a writable sweep database");
}

std::vector<RunRecord> SweepDatabase::runs() const {
  Statement select(
      impl_->db,
      fmt::format("SELECT {} FROM runs ORDER BY point", run_columns::column_list()).c_str(),
      impl_->path);
  std::vector<RunRecord> out;
  while (select.next_row(impl_->db))
    out.push_back(run_columns::read_run(select.get(), impl_->path));
  return out;
}

std::vector<SweepProvenance> SweepDatabase::provenance() const {
  std::vector<SweepProvenance> rows;
  if (!has_table(impl_->db, impl_->path, "provenance"))
    return rows;
  Statement select(
      impl_->db,
      fmt::format("SELECT {} FROM provenance ORDER BY rowid", k_provenance_columns).c_str(),
      impl_->path);
  while (select.next_row(impl_->db)) {
    rows.push_back({select.text_at(0), select.text_at(1), select.text_at(2), select.text_at(3),
                    select.text_at(4)});
  }
  return rows;
}

void SweepDatabase::record_provenance(const SweepProvenance& row) {
  // Recorded again, a row moves to the end: the last row says which sweep the file holds now.
  Statement erase(impl_->db,
                  "DELETE FROM provenance WHERE source=?1 AND identity=?2 AND shard=?3 AND "
                  "exitsim_version=?4 AND exitsim_commit=?5",
                  impl_->path);
  Statement insert(impl_->db,
                   "INSERT INTO provenance (source, identity, shard, exitsim_version, "
                   "exitsim_commit) VALUES (?1, ?2, ?3, ?4, ?5)",
                   impl_->path);
  for (Statement* s : {&erase, &insert}) {
    s->text(1, row.source);
    s->text(2, row.identity);
    s->text(3, row.shard);
    s->text(4, row.exitsim_version);
    s->text(5, row.exitsim_commit);
    if (sqlite3_step(s->get()) != SQLITE_DONE)
      s->fail(impl_->db, "a writable sweep database");
  }
}

}  // namespace exitsim::analysis
