#include "sweep_run_columns.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "exitsim/core/error.hpp"

namespace exitsim::analysis::run_columns {

namespace {

// The setting's columns, after the digest and the metrics.
const std::vector<Column> k_setting_columns = {
    {"exit_policy", "TEXT"},     {"exit_threshold", "REAL"}, {"confidence_measure", "TEXT"},
    {"exit_capacities", "TEXT"}, {"sync_strategy", "TEXT"},  {"max_running", "REAL"}};

// Positions in column_list().
constexpr int k_key = 0, k_point = 1, k_overrides = 2, k_scenario = 3, k_summary = 4, k_digest = 5,
              k_first_metric = 6;
constexpr int k_metric_count = static_cast<int>(std::size(k_run_metric_columns));
constexpr int k_first_setting = k_first_metric + k_metric_count;

std::string join_names(const std::vector<Column>& columns) {
  std::string names;
  for (const Column& c : columns)
    names += (names.empty() ? "" : ", ") + c.name;
  return names;
}

void bind_text(sqlite3_stmt* statement, int column, const std::string& value) {
  sqlite3_bind_text(statement, column + 1, value.c_str(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
}

std::string text_at(sqlite3_stmt* statement, int column) {
  const auto* p = sqlite3_column_text(statement, column);
  return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
}

// A REAL column; NULL (how SQLite stores a NaN) reads back as NaN.
double number_at(sqlite3_stmt* statement, int column) {
  return sqlite3_column_type(statement, column) == SQLITE_NULL
             ? std::numeric_limits<double>::quiet_NaN()
             : sqlite3_column_double(statement, column);
}

// "0.5,0.25": each number in its shortest exact form, so it reads back equal.
std::string capacities_text(const std::vector<double>& capacities) {
  return fmt::format("{}", fmt::join(capacities, ","));
}

std::vector<double> capacities_of(const std::string& text, const std::string& path,
                                  const std::string& key) {
  std::vector<double> out;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    double value = 0;
    const auto [stop, ec] = std::from_chars(text.data() + begin, text.data() + end, value);
    if (ec != std::errc{} || stop != text.data() + end) {
      throw InputError(
          {path, 0, 0, "runs.exit_capacities"},
          expected_found("comma-separated numbers (run " + key + ")", "\"" + text + "\""));
    }
    out.push_back(value);
    begin = end + 1;
  }
  return out;
}

void bind_setting(sqlite3_stmt* insert, const RunSetting& s) {
  const int at = k_first_setting;
  bind_text(insert, at, s.policy);
  if (s.threshold)
    sqlite3_bind_double(insert, at + 2, *s.threshold);
  else
    sqlite3_bind_null(insert, at + 2);
  bind_text(insert, at + 2, s.measure);
  bind_text(insert, at + 3, capacities_text(s.capacities));
  bind_text(insert, at + 4, s.strategy);
  sqlite3_bind_double(insert, at + 6, s.max_running);
}

RunSetting read_setting(sqlite3_stmt* select, const std::string& path, const std::string& key) {
  const int at = k_first_setting;
  if (sqlite3_column_type(select, at) == SQLITE_NULL) {
    throw InputError({path, 0, 0, "runs.exit_policy"},
                     expected_found("the run's setting", "none for run \"" + key +
                                                             "\", stored by an older exitsim; " +
                                                             older_database_advice(path)));
  }
  RunSetting s;
  s.policy = text_at(select, at);
  if (sqlite3_column_type(select, at + 1) != SQLITE_NULL)
    s.threshold = sqlite3_column_double(select, at + 1);
  s.measure = text_at(select, at + 2);
  s.capacities = capacities_of(text_at(select, at + 3), path, key);
  s.strategy = text_at(select, at + 4);
  s.max_running = sqlite3_column_double(select, at + 5);
  return s;
}

}  // namespace

const std::vector<Column>& first_columns() {
  static const std::vector<Column> columns = {{"key", "TEXT PRIMARY KEY"},
                                              {"point", "INTEGER NOT NULL"},
                                              {"overrides", "TEXT NOT NULL"},
                                              {"scenario", "TEXT NOT NULL"},
                                              {"summary", "TEXT NOT NULL"}};
  return columns;
}

const std::vector<Column>& later_columns() {
  static const std::vector<Column> columns = [] {
    // Rows from before digests were kept get "" and are rerun as stale.
    std::vector<Column> c = {{"digest", "TEXT NOT NULL DEFAULT ''"}};
    for (const RunMetricColumn& metric : k_run_metric_columns)
      c.push_back({std::string(metric.name), "REAL"});
    c.insert(c.end(), k_setting_columns.begin(), k_setting_columns.end());
    return c;
  }();
  return columns;
}

std::string column_list() {
  return first_column_list() + ", " + later_column_list();
}

std::string first_column_list() {
  return join_names(first_columns());
}

std::string later_column_list() {
  return join_names(later_columns());
}

std::string create_table_sql() {
  std::string columns;
  for (const auto* list : {&first_columns(), &later_columns()}) {
    for (const Column& c : *list)
      columns += (columns.empty() ? "" : ", ") + c.name + " " + c.declaration;
  }
  return "CREATE TABLE IF NOT EXISTS runs (" + columns + ")";
}

std::string insert_sql() {
  const std::size_t count = first_columns().size() + later_columns().size();
  std::string values;
  for (std::size_t i = 1; i <= count; ++i)
    values += fmt::format("{}?{}", i == 1 ? "" : ", ", i);
  return fmt::format("INSERT OR REPLACE INTO runs ({}) VALUES ({})", column_list(), values);
}

std::string stale_digest_sql() {
  return "SELECT key, CASE WHEN exit_policy IS NULL THEN '' ELSE digest END FROM runs";
}

void bind_run(sqlite3_stmt* insert, const RunRecord& run) {
  std::string overrides;
  for (const std::string& o : run.point.overrides)
    overrides += (overrides.empty() ? "" : "\n") + o;
  bind_text(insert, k_key, run.point.key);
  sqlite3_bind_int64(insert, k_point + 1, static_cast<sqlite3_int64>(run.point.index));
  bind_text(insert, k_overrides, overrides);
  bind_text(insert, k_scenario, run.scenario_yaml);
  bind_text(insert, k_summary, run.metrics.summary_json);
  bind_text(insert, k_digest, run.point.digest);
  int at = k_first_metric;
  for (const RunMetricColumn& metric : k_run_metric_columns)
    sqlite3_bind_double(insert, ++at, run.metrics.*metric.member);
  bind_setting(insert, run.setting);
}

RunRecord read_run(sqlite3_stmt* select, const std::string& path) {
  RunRecord r;
  r.point.key = text_at(select, k_key);
  r.point.index = static_cast<std::size_t>(sqlite3_column_int64(select, k_point));
  const std::string overrides = text_at(select, k_overrides);
  for (std::size_t begin = 0; begin < overrides.size();) {
    const std::size_t end = std::min(overrides.find('\n', begin), overrides.size());
    r.point.overrides.push_back(overrides.substr(begin, end - begin));
    begin = end + 1;
  }
  r.scenario_yaml = text_at(select, k_scenario);
  r.metrics.summary_json = text_at(select, k_summary);
  r.point.digest = text_at(select, k_digest);
  int at = k_first_metric;
  for (const RunMetricColumn& metric : k_run_metric_columns)
    r.metrics.*metric.member = number_at(select, at++);
  r.setting = read_setting(select, path, r.point.key);
  return r;
}

std::string older_database_advice(const std::string& path) {
  return "run `exitsim sweep SCENARIO --db " + path +
         "` with this exitsim (it reruns the runs stored without their setting)";
}

}  // namespace exitsim::analysis::run_columns
