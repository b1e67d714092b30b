#pragma once
// The sweep database's runs table: its columns, in the order the statements bind and select
// them, and how a RunRecord goes in and comes out. The metric columns are k_run_metric_columns
// (sweep_columns.hpp), so a new metric needs no edit here.

#include <sqlite3.h>

#include <string>
#include <vector>

#include "exitsim/analysis/sweep.hpp"

namespace exitsim::analysis::run_columns {

struct Column {
  std::string name;
  std::string declaration;  // its SQL type and constraints
};

// The columns every sweep database has had since the first; a file without one of them is not a
// sweep database.
const std::vector<Column>& first_columns();
// The columns added since (the digest, the setting, and any metric added to
// k_run_metric_columns): a sweep adds those an older file lacks (ALTER TABLE). Its rows then
// hold NULL there; a row without its setting is rerun as stale (stale_digest_sql).
const std::vector<Column>& later_columns();

// Every column, comma-separated, in the order bind_run binds and read_run reads them.
std::string column_list();
// The first and the later columns, each comma-separated.
std::string first_column_list();
std::string later_column_list();
std::string create_table_sql();
// INSERT OR REPLACE of every column, as ?1..?N.
std::string insert_sql();
// The stored digest, or "" for a row stored before its setting was (a sweep reruns it).
std::string stale_digest_sql();

// Binds `run` to a statement of insert_sql.
void bind_run(sqlite3_stmt* insert, const RunRecord& run);
// The run at a row of `SELECT column_list()`; throws InputError naming the database file
// (`path`) and the run for a row stored without its setting (by an older exitsim).
RunRecord read_run(sqlite3_stmt* select, const std::string& path);

// What to do about a database written before the setting columns: one sentence for errors.
std::string older_database_advice(const std::string& path);

}  // namespace exitsim::analysis::run_columns
