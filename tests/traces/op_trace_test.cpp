#include "exitsim/traces/op_trace.hpp"

#include <gtest/gtest.h>

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

const std::string k_head =
    "# exitsim-op-trace v1\n"
    "name,kind,device,stream,start_ns,duration_ns,batch_tokens,context_tokens,depth,recursion,"
    "step_id,correlation_id\n";

// The what() of the InputError that reading all of `text` throws.
std::string read_error(const std::string& text) {
  return test_support::error_of([&] {
    OpTraceReader reader(std::make_unique<std::istringstream>(text), "ops.csv");
    while (reader.next()) {
    }
  });
}

TEST(OpKind, NamesRoundTrip) {
  const std::vector<std::string> names = op_kind_names();
  ASSERT_EQ(names.size(), 9u);
  for (const std::string& name : names) {
    const std::optional<OpKind> kind = parse_op_kind(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(to_string(*kind), name);
  }
  EXPECT_EQ(parse_op_kind("lm_head"), OpKind::lm_head);
  EXPECT_FALSE(parse_op_kind("GEMM").has_value());
}

TEST(OpTrace, RoundTripsEveryField) {
  const test_support::TempDir dir;
  const std::string path = dir.path("round_trip.csv");
  const std::vector<OpTraceRow> rows = {
      {.name = "attn.decode",
       .kind = OpKind::attention,
       .device = "cpu",
       .stream = 0,
       .start_ns = 100,
       .duration_ns = 2500,
       .batch_tokens = 8,
       .context_tokens = 4096,
       .depth = 3,
       .recursion = 1,
       .step_id = 17,
       .correlation_id = 9},
      {.name = "void gemm<float, 128>(float const*, float*)",
       .kind = OpKind::gemm,
       .device = "cuda:0",
       .stream = 7,
       .start_ns = -5,
       .duration_ns = 0,
       .batch_tokens = 0,
       .context_tokens = 0,
       .depth = -1,
       .recursion = 0,
       .step_id = 18'446'744'073'709'551'615ULL,
       .correlation_id = 18'446'744'073'709'551'615ULL},
      {.name = "\"quoted\" op", .kind = OpKind::other, .device = "cuda:1"},
  };
  {
    OpTraceWriter writer(path);
    for (const OpTraceRow& row : rows)
      writer.write(row);
    EXPECT_FALSE(fs::exists(path));
    writer.finish();
    EXPECT_EQ(writer.rows_written(), 3);
  }
  OpTraceReader reader(path);
  EXPECT_EQ(reader.name(), path);
  for (const OpTraceRow& expected : rows) {
    const std::optional<OpTraceRow> row = reader.next();
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(*row, expected);
  }
  EXPECT_FALSE(reader.next().has_value());
}

TEST(OpTrace, UnfinishedWriterLeavesNoFile) {
  const test_support::TempDir dir;
  const std::string path = dir.path("unfinished.csv");
  {
    OpTraceWriter writer(path);
    writer.write({.name = "x"});
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(detail::AtomicOutputFile::temp_path_for(path)));
}

TEST(OpTrace, VersionErrors) {
  EXPECT_EQ(read_error("name,kind\n"),
            "ops.csv:1: version: expected \"# exitsim-op-trace v1\", found \"name,kind\"");
  EXPECT_EQ(read_error("# exitsim-op-trace v0\n"),
            "ops.csv:1: version: expected \"# exitsim-op-trace v1\", found \"# exitsim-op-trace "
            "v0\" (this build reads only v1)");
}

TEST(OpTrace, MalformedRowsNameLineAndColumn) {
  EXPECT_EQ(read_error(k_head + ",gemm,cpu,0,0,1,0,0,0,0,0,0\n"),
            "ops.csv:3:1: name: expected a non-empty string, found an empty field");
  EXPECT_EQ(read_error(k_head + "mlp,gemmm,cpu,0,0,1,0,0,0,0,0,0\n"),
            "ops.csv:3:5: kind: expected one of gemm, attention, norm, elementwise, lm_head, "
            "sampling, router, memcpy, other, found \"gemmm\" (did you mean gemm?)");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,,0,0,1,0,0,0,0,0,0\n"),
            "ops.csv:3:10: device: expected a non-empty string, found an empty field");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,-1,0,1,0,0,0,0,0,0\n"),
            "ops.csv:3:14: stream: expected a non-negative integer, found \"-1\"");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,0,1e3,1,0,0,0,0,0,0\n"),
            "ops.csv:3:16: start_ns: expected an integer from -2305843009213693952 to "
            "2305843009213693952, found \"1e3\"");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,0,0,-1,0,0,0,0,0,0\n"),
            "ops.csv:3:18: duration_ns: expected an integer from 0 to 2305843009213693952, found "
            "\"-1\"");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,0,0,1,0,0,-2,0,0,0\n"),
            "ops.csv:3:24: depth: expected an integer >= -1, found \"-2\"");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,0,0,1,0,0,0,0,0,+1\n"),
            "ops.csv:3:30: correlation_id: expected a non-negative integer, found \"+1\"");
  EXPECT_EQ(read_error(k_head + "mlp,gemm,cpu,0,0,1,0,0,0,0,0,0,\n"),
            "ops.csv:3: expected 12 fields, found 13");
}

}  // namespace
}  // namespace exitsim::traces
