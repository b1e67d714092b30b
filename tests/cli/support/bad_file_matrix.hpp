// The bad-input matrix's harness (issue 19): a file's cases, each accepted or refused, run
// through a command that reads the file and writes into an output folder; a refusal is exit 1,
// one line starting with the file's path and saying what was expected, and nothing left in the
// folder. Used by bad_input_matrix_files_test.cpp and bad_input_matrix_benchmarks_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace bad_file_matrix {

using namespace cli_support;

struct Case {
  std::string category;
  std::string text;  // the file's content
  bool accepted = false;
  // Refused: a part of the one line, naming the message's class (what was expected, or found).
  std::string says;
};

inline Case accepted(std::string category, std::string text) {
  return {std::move(category), std::move(text), true, ""};
}

inline Case refused(std::string category, std::string text, std::string says) {
  return {std::move(category), std::move(text), false, std::move(says)};
}

// `text` with CRLF line ends.
inline std::string with_crlf(const std::string& text) {
  std::string crlf;
  for (const char c : text)
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return crlf;
}

// `text` with its first `from` replaced by `to` (which must be there).
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

inline const std::string k_bom = "\xEF\xBB\xBF";
inline const std::string k_nul_in_39 = std::string(
    "3\0"
    "9",
    3);
// A 17 MiB field, on a line longer than any a reader holds whole (request traces stop at 16 MiB).
inline const std::string k_huge_number(17 << 20, '7');

class BadFileMatrix : public Cli {
 protected:
  // For each case: writes its text to `in`, runs the command `command(out)` on a fresh empty
  // folder `out`, and checks the effect. Returns how many cases were refused.
  int check(const std::vector<Case>& cases, const fs::path& in,
            const std::function<std::string(const fs::path& out)>& command) const {
    int refusals = 0;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.category);
      std::ofstream(in, std::ios::binary | std::ios::trunc) << c.text;
      const fs::path out = dir_ / "out";
      fs::remove_all(out);
      fs::create_directories(out);
      const Result r = run(command(out));
      if (c.accepted) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_FALSE(fs::is_empty(out));
        continue;
      }
      ++refusals;
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_EQ(r.err.rfind("exitsim: error: " + in.string() + ":", 0), 0U) << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos)
          << "not saying \"" << c.says << "\": " << r.err;
      // An unknown key's message suggests the nearest known one ("did you mean") instead.
      if (c.says.rfind("unknown key", 0) != 0) {
        EXPECT_NE(r.err.find("expected"), std::string::npos) << r.err;
      }
      EXPECT_LE(r.err.size(), 1100U) << r.err.substr(0, 200);
      EXPECT_TRUE(fs::is_empty(out)) << "output left behind";
      // Nor a staging folder beside it (out.exitsim-<pid>.tmp).
      for (const fs::directory_entry& e : fs::directory_iterator(dir_))
        EXPECT_NE(e.path().filename().string().rfind("out.", 0), 0U) << e.path();
    }
    return refusals;
  }

  static std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }
};

}  // namespace bad_file_matrix
