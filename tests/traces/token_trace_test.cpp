#include "exitsim/traces/token_trace.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test: a file left by an earlier run would hide a writer that renames too
// early.
using test_support::error_of;
using test_support::read_file;
using test_support::TempDir;

TokenTraceReader reader_of(const std::string& text) {
  return TokenTraceReader(std::make_unique<std::istringstream>(text), "t.csv");
}

// The what() of the InputError that reading all of `text` throws.
std::string read_error(const std::string& text) {
  return error_of([&] {
    TokenTraceReader reader = reader_of(text);
    while (reader.next()) {
    }
  });
}

// The header of a trace written before the adaptive threshold's optional columns.
const std::string k_head =
    "# exitsim-token-trace v1\n"
    "request_id,position,exit_depth,exit_point,score,policy,replica,time_ns\n";

TEST(TokenTrace, RoundTripsEveryField) {
  TempDir dir;
  const std::string path = dir.path("round_trip.csv");
  std::vector<TokenTraceRow> rows = {
      {.request_id = 7,
       .position = 0,
       .exit_depth = 12,
       .exit_point = 2,
       .score = 0.912345678901,
       .policy = "confidence",
       .replica = 1,
       .time_ns = 1'234'567'890'123,
       .confidences = {0.25, 1.0, 0.912345678901},
       .agreements = {1, 0, 1}},
      {.request_id = 18'446'744'073'709'551'615ULL,
       .position = 41,
       .exit_depth = 32,
       .exit_point = 4,
       .score = std::nan(""),
       .policy = "full_depth",
       .replica = 0,
       .time_ns = 0},
      {.request_id = 3,
       .position = 2,
       .exit_depth = 4,
       .exit_point = 0,
       .score = -1e-300,
       .policy = "odd, \"quoted\"\nname",
       .replica = 3,
       .time_ns = 5},
  };
  {
    TokenTraceWriter writer(path);
    for (const TokenTraceRow& row : rows)
      writer.write(row);
    EXPECT_FALSE(fs::exists(path)) << "the file appears only when finished";
    writer.finish();
    EXPECT_EQ(writer.rows_written(), 3);
  }
  EXPECT_FALSE(fs::exists(detail::AtomicOutputFile::temp_path_for(path)));
  const std::string text = read_file(path);
  EXPECT_TRUE(
      text.starts_with("# exitsim-token-trace v1\n"
                       "request_id,position,exit_depth,exit_point,score,policy,replica,"
                       "time_ns,confidences,agreements\n"))
      << text;
  EXPECT_NE(text.find(",0.25;1;0.912345678901,1;0;1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(",,full_depth,"), std::string::npos) << "NaN score is an empty field";
  EXPECT_NE(text.find("\"odd, \"\"quoted\"\"\nname\""), std::string::npos) << text;

  TokenTraceReader reader(path);
  for (const TokenTraceRow& expected : rows) {
    const std::optional<TokenTraceRow> row = reader.next();
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(*row, expected);
  }
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_FALSE(reader.next().has_value());
}

TEST(TokenTrace, UnfinishedWriterLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.path("unfinished.csv");
  {
    TokenTraceWriter writer(path);
    writer.write({.request_id = 1, .policy = "confidence"});
    EXPECT_TRUE(fs::exists(detail::AtomicOutputFile::temp_path_for(path)));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(detail::AtomicOutputFile::temp_path_for(path)));
}

TEST(TokenTrace, WriterToMissingDirectoryNamesTheFile) {
  try {
    TokenTraceWriter writer("/nonexistent-exitsim-dir/t.csv");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "/nonexistent-exitsim-dir/t.csv");
    EXPECT_NE(std::string(e.what()).find("cannot create /nonexistent-exitsim-dir/t.csv.exitsim-"),
              std::string::npos)
        << e.what();
  }
}

TEST(TokenTrace, AcceptsCrLfAndNoRows) {
  TokenTraceReader empty = reader_of(k_head);
  EXPECT_FALSE(empty.next().has_value());
  TokenTraceReader crlf = reader_of(
      "# exitsim-token-trace v1\r\n"
      "request_id,position,exit_depth,exit_point,score,policy,replica,time_ns\r\n"
      "1,2,3,4,0.5,confidence,0,10\r\n");
  const std::optional<TokenTraceRow> row = crlf.next();
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->time_ns, 10);
  EXPECT_EQ(row->score, 0.5);
}

TEST(TokenTrace, VersionAndHeaderErrors) {
  EXPECT_EQ(read_error(""),
            "t.csv:1: version: expected \"# exitsim-token-trace v1\", found an "
            "empty file");
  EXPECT_EQ(read_error("# exitsim-op-trace v1\n"),
            "t.csv:1: version: expected \"# exitsim-token-trace v1\", found \"# exitsim-op-trace "
            "v1\"");
  EXPECT_EQ(read_error("# exitsim-token-trace v2\n"),
            "t.csv:1: version: expected \"# exitsim-token-trace v1\", found \"# "
            "exitsim-token-trace v2\" (this build reads only v1)");
  EXPECT_EQ(read_error("# exitsim-token-trace v1\n"),
            "t.csv:2: header: expected the header row, found end of file");
  EXPECT_EQ(read_error("# exitsim-token-trace v1\nrequest_id,pos\n"),
            "t.csv:2:12: header: expected column \"position\", found \"pos\"");
  EXPECT_EQ(read_error("# exitsim-token-trace v1\nrequest_id,position\n"),
            "t.csv:2: header: expected 8 to 10 columns (request_id,position,exit_depth,exit_point,"
            "score,policy,replica,time_ns,confidences,agreements), found 2");
}

// A trace written before the adaptive threshold's columns existed (8 columns) still reads: its
// rows have no confidences and no agreement flags.
TEST(TokenTrace, ReadsTracesWithoutTheAdaptiveColumns) {
  TokenTraceReader reader = reader_of(k_head + "4,1,6,2,0.5,confidence,0,10\n");
  const std::optional<TokenTraceRow> row = reader.next();
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->exit_point, 2);
  EXPECT_EQ(row->time_ns, 10);
  EXPECT_TRUE(row->confidences.empty());
  EXPECT_TRUE(row->agreements.empty());
}

TEST(TokenTrace, RefusesConfidencesOutsideTheUnitIntervalAndFlagsOtherThanZeroOrOne) {
  const std::string head =
      "# exitsim-token-trace v1\n"
      "request_id,position,exit_depth,exit_point,score,policy,replica,"
      "time_ns,confidences,agreements\n";
  EXPECT_EQ(read_error(head + "4,1,6,2,0.5,adaptive_threshold,0,10,0.5;1.5,1\n"),
            "t.csv:3:37: confidences: expected ';'-separated items, each a confidence in [0, 1], "
            "found \"1.5\"");
  EXPECT_EQ(read_error(head + "4,1,6,2,0.5,adaptive_threshold,0,10,0.5,0.5\n"),
            "t.csv:3:41: agreements: expected agreement flags 0 or 1, found 0.5");
}

TEST(TokenTrace, MalformedRowsNameLineAndColumn) {
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,confidence,0\n"),
            "t.csv:3: expected 8 fields, found 7");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,confidence,0,1\n\n"),
            "t.csv:4: expected 8 fields, found an empty line");
  EXPECT_EQ(read_error(k_head + "x,2,3,4,0.5,confidence,0,1\n"),
            "t.csv:3:1: request_id: expected a non-negative integer, found \"x\"");
  EXPECT_EQ(read_error(k_head + "-1,2,3,4,0.5,confidence,0,1\n"),
            "t.csv:3:1: request_id: expected a non-negative integer, found \"-1\"");
  EXPECT_EQ(read_error(k_head + "1,-2,3,4,0.5,confidence,0,1\n"),
            "t.csv:3:3: position: expected a non-negative integer, found \"-2\"");
  EXPECT_EQ(read_error(k_head + "1,2,,4,0.5,confidence,0,1\n"),
            "t.csv:3:5: exit_depth: expected a non-negative integer, found an empty field");
  EXPECT_EQ(read_error(k_head + "1,2,3,4.5,0.5,confidence,0,1\n"),
            "t.csv:3:7: exit_point: expected a non-negative integer, found \"4.5\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,99999999999,0.5,confidence,0,1\n"),
            "t.csv:3:7: exit_point: expected an integer <= 2147483647, found \"99999999999\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,high,confidence,0,1\n"),
            "t.csv:3:9: score: expected a finite number or an empty field, found \"high\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,nan,confidence,0,1\n"),
            "t.csv:3:9: score: expected a finite number or an empty field, found \"nan\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,,0,1\n"),
            "t.csv:3:13: policy: expected a non-empty string, found an empty field");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,confidence, 0,1\n"),
            "t.csv:3:24: replica: expected a non-negative integer, found \" 0\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,confidence,0,99999999999999999999\n"),
            "t.csv:3:26: time_ns: expected a non-negative integer that fits in 64 bits, found "
            "\"99999999999999999999\"");
  EXPECT_EQ(
      read_error(k_head + "1,2,3,4,0.5,\"confidence,0,1\n"),
      "t.csv:3:13: expected a closing quote for this quoted field, found the end of the file");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,\"conf\"x,0,1\n"),
            "t.csv:3:19: expected ',' after a closing quote, found \"x\"");
  EXPECT_EQ(read_error(k_head + "1,2,3,4,0.5,con\"f,0,1\n"),
            "t.csv:3:13: expected a quote only inside a quoted field (quote the whole field and "
            "double the quote), found one in an unquoted field");
}

TEST(TokenTrace, ReaderOfMissingFileNamesIt) {
  EXPECT_EQ(error_of([] { TokenTraceReader reader("/nonexistent-exitsim-dir/t.csv"); }),
            "/nonexistent-exitsim-dir/t.csv: cannot open: No such file or directory");
}

}  // namespace
}  // namespace exitsim::traces
