// The JSON limits every trace reader shares (core/json_input.hpp), through the readers that had
// none of their own: serving-benchmark results (validate --against) and Mooncake rows.
#include <gtest/gtest.h>

#include <string>

#include "exitsim/traces/serving_benchmark.hpp"
#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::TempDir;

std::string benchmark_error(const std::string& path) {
  return error_of([&] { (void)read_serving_benchmark(path); });
}

// N1: a 100,000-deep result file is refused at its 33rd level.
TEST(JsonLimits, ADeeplyNestedBenchmarkResultIsRefused) {
  TempDir dir;
  const std::string path =
      dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(benchmark_error(path),
            path + ": expected at most 32 levels of nesting, found deeper nesting at byte 33");
}

// N15: a key given twice was read last-wins in benchmark results, refused in config.json.
TEST(JsonLimits, AKeyTwiceInABenchmarkResultIsRefused) {
  TempDir dir;
  const std::string path = dir.write(
      "twice.json", R"({"backend": "vllm", "model_id": "m", "completed": 3, "completed": 4})");
  EXPECT_EQ(benchmark_error(path),
            path +
                ": expected each key once per object, found the key \"completed\" again at "
                "byte 64");
}

}  // namespace
}  // namespace exitsim::traces
