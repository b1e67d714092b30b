// A ShareGPT trace in a scenario: token counts from workload.trace.tokenizer, arrivals from
// workload.arrivals (the file has no times).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/sim/workload/arrivals.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/byte_level_vocab.hpp"
#include "support/request_traces.hpp"

namespace exitsim::sim {
namespace {

using test_support::TempDir;

TEST(ShareGptWorkload, CountsTurnsWithTheScenarioTokenizerAndDrawsArrivals) {
  const TempDir dir;
  scenario::WorkloadConfig c;
  c.source = "trace";
  c.trace.format = "auto";
  // Only merge "h i": "hi hi" is "hi" + " hi" -> hi, Ġ hi = 3 tokens; "bye" has no merge = 3.
  c.trace.tokenizer = dir.write("tokenizer.json", test_support::byte_level_tokenizer_json({"h i"}));
  c.trace.path = dir.write("sharegpt.json", R"([
    {"id": "a", "conversations": [{"from": "human", "value": "hi hi"},
                                  {"from": "gpt", "value": "bye"}]},
    {"id": "b", "conversations": [{"from": "human", "value": "bye"},
                                  {"from": "gpt", "value": "hi"}]}])");
  c.arrivals.process = "poisson";
  c.arrivals.rate = 5.0;
  const auto source = make_workload(c, 3);
  EXPECT_EQ(source->format_name(), "sharegpt");
  EXPECT_TRUE(source->has_arrivals());
  PoissonArrivals expected(5.0, RandomStream(3, k_arrivals_stream));
  std::vector<std::pair<std::int64_t, std::int64_t>> lengths;
  while (const auto request = source->next()) {
    EXPECT_EQ(request->arrival, expected.next());
    lengths.emplace_back(request->input_tokens, request->output_tokens);
  }
  EXPECT_EQ(lengths, (std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 3}, {3, 1}}));
}

TEST(ShareGptWorkload, WithoutATokenizerNamesTheKey) {
  const TempDir dir;
  scenario::WorkloadConfig c;
  c.source = "trace";
  c.trace.format = "sharegpt";
  c.trace.path = dir.write("sharegpt.json", "[]");
  EXPECT_EQ(test_support::error_of([&] { make_workload(c, 1); }),
            c.trace.path +
                ": workload.trace.tokenizer: expected a tokenizer.json to count the ShareGPT "
                "turns' tokens with, found none");
}

}  // namespace
}  // namespace exitsim::sim
