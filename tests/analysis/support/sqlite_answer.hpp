#pragma once
// A sweep database read through a connection of the test's own: an oracle independent of
// SweepDatabase.

#include <sqlite3.h>

#include <string>

namespace exitsim::test_support {

// The first answer of `sql` on `path` through a read-only connection of the test's own; SQLite's
// message when the statement fails.
inline std::string sqlite_answer(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string answer = "(cannot open)";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    answer = "(error)";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK) {
      const int result = sqlite3_step(statement);
      if (result == SQLITE_ROW) {
        const auto* text = sqlite3_column_text(statement, 0);
        answer = text == nullptr ? "" : reinterpret_cast<const char*>(text);
      } else if (result != SQLITE_DONE) {
        answer = sqlite3_errmsg(db);
      }
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return answer;
}

}  // namespace exitsim::test_support
