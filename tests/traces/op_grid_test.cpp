#include "exitsim/traces/op_grid.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

const std::string k_head =
    "# exitsim-op-grid v1\n"
    "op,kind,shape,layer,recursion,batch_tokens,context_tokens,repetitions,median_us,p10_us,"
    "p90_us,min_us,max_us\n";

// The what() of the InputError that reading all of the file throws.
std::string read_error(const test_support::TempDir& dir, const std::string& text) {
  const std::string path = dir.write("ops.csv", text);
  return test_support::error_of([&] {
    OpGridReader reader(path);
    while (reader.next()) {
    }
  });
}

TEST(OpGrid, RowsRoundTripAndTheFileIsKnownByItsVersionLine) {
  const test_support::TempDir dir;
  const std::string path = dir.path("ops.csv");
  const OpGridRow row{"qkv_proj", OpKind::gemm, "prefill", 1,      1,    32,   2576,
                      15,         100.5,        99.25,     101.75, 98.0, 130.0};
  {
    OpGridWriter writer(path);
    writer.write(row);
    writer.finish();
  }
  EXPECT_TRUE(is_op_grid(path));
  OpGridReader reader(path);
  const std::optional<OpGridRow> read = reader.next();
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, row);
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_FALSE(is_op_grid(dir.write("trace.csv", "# exitsim-op-trace v1\n")));
}

// Every malformed row is one error naming the file, the line and the column.
TEST(OpGrid, MalformedRowsAreRefusedNamingTheLineAndColumn) {
  const test_support::TempDir dir;
  const std::string shape =
      read_error(dir, k_head + "qkv_proj,gemm,chunk,1,1,32,2576,15,100,99,101,98,130\n");
  EXPECT_NE(shape.find("ops.csv:3"), std::string::npos) << shape;
  EXPECT_NE(shape.find("expected decode or prefill"), std::string::npos) << shape;
  const std::string order =
      read_error(dir, k_head + "qkv_proj,gemm,decode,1,1,32,2576,15,100,101,99,98,130\n");
  EXPECT_NE(order.find("min_us <= p10_us <= median_us <= p90_us <= max_us"), std::string::npos)
      << order;
  const std::string negative =
      read_error(dir, k_head + "qkv_proj,gemm,decode,1,1,32,2576,15,-1,-2,0,-3,1\n");
  EXPECT_NE(negative.find("median_us"), std::string::npos) << negative;
  const std::string batch =
      read_error(dir, k_head + "qkv_proj,gemm,decode,1,1,0,2576,15,100,99,101,98,130\n");
  EXPECT_NE(batch.find("batch_tokens"), std::string::npos) << batch;
  const std::string header = read_error(dir, "# exitsim-op-grid v1\nop,kind\n");
  EXPECT_NE(header.find("ops.csv"), std::string::npos) << header;
}

}  // namespace
}  // namespace exitsim::traces
