#include "exitsim/analysis/trace_summary.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "exitsim/traces/request_trace.hpp"
#include "support/request_traces.hpp"

namespace exitsim::analysis {
namespace {

using test_support::request;

// An in-memory trace that reports two skipped rows.
test_support::VectorSource vector_source(std::vector<RequestDescriptor> requests) {
  return test_support::VectorSource(
      std::move(requests), {.skipped_rows = 2, .has_arrivals = std::nullopt, .format = "test"});
}

// Gaps 1, 1, 3, 3 s: mean 2 s, population standard deviation 1 s, so CV 0.5.
std::vector<RequestDescriptor> small_trace() {
  return {request(0, 0, 10, 1), request(1, 1 * k_ns_per_s, 20, 2),
          request(2, 2 * k_ns_per_s, 20, 3), request(3, 5 * k_ns_per_s, 30, 4),
          request(4, 8 * k_ns_per_s, 100, 5)};
}

TEST(TraceSummary, SmallTraceHasExactStatistics) {
  auto source = vector_source(small_trace());
  const TraceSummary summary = summarize_requests(source);
  EXPECT_EQ(summary.format, "test");
  EXPECT_EQ(summary.requests, 5);
  EXPECT_EQ(summary.skipped_rows, 2);
  EXPECT_EQ(summary.first_arrival, 0);
  EXPECT_EQ(summary.last_arrival, 8 * k_ns_per_s);
  EXPECT_EQ(summary.span, 8 * k_ns_per_s);
  ASSERT_TRUE(summary.mean_rate_per_s.has_value());
  EXPECT_DOUBLE_EQ(*summary.mean_rate_per_s, 0.5);
  ASSERT_TRUE(summary.interarrival_cv.has_value());
  EXPECT_DOUBLE_EQ(*summary.interarrival_cv, 0.5);

  // Nearest rank over 10 20 20 30 100: p50 is the 3rd value, p90..p99 the 5th.
  EXPECT_EQ(summary.input.min, 10);
  EXPECT_EQ(summary.input.p50, 20);
  EXPECT_EQ(summary.input.p90, 100);
  EXPECT_EQ(summary.input.p95, 100);
  EXPECT_EQ(summary.input.p99, 100);
  EXPECT_EQ(summary.input.max, 100);
  EXPECT_DOUBLE_EQ(summary.input.mean, 36.0);
  EXPECT_EQ(summary.output.p50, 3);
  EXPECT_DOUBLE_EQ(summary.output.mean, 3.0);
}

TEST(TraceSummary, PercentilesOfOneToHundred) {
  std::vector<RequestDescriptor> requests;
  // Shuffled order: the histogram must not depend on arrival order of lengths.
  for (std::uint64_t i = 0; i < 100; ++i) {
    requests.push_back(request(i, std::nullopt, 7, static_cast<std::int64_t>((i * 37) % 100 + 1)));
  }
  auto source = vector_source(requests);
  const TraceSummary summary = summarize_requests(source);
  EXPECT_EQ(summary.requests, 100);
  EXPECT_EQ(summary.output.min, 1);
  EXPECT_EQ(summary.output.p50, 50);
  EXPECT_EQ(summary.output.p90, 90);
  EXPECT_EQ(summary.output.p95, 95);
  EXPECT_EQ(summary.output.p99, 99);
  EXPECT_EQ(summary.output.max, 100);
  EXPECT_DOUBLE_EQ(summary.output.mean, 50.5);
  EXPECT_EQ(summary.input.p50, 7);
  EXPECT_EQ(summary.input.p99, 7);
  // Length-only: no timing at all.
  EXPECT_FALSE(summary.first_arrival.has_value());
  EXPECT_FALSE(summary.last_arrival.has_value());
  EXPECT_FALSE(summary.span.has_value());
  EXPECT_FALSE(summary.mean_rate_per_s.has_value());
  EXPECT_FALSE(summary.interarrival_cv.has_value());
}

TEST(TraceSummary, SimultaneousArrivalsHaveNoRateOrCv) {
  auto source = vector_source({request(0, 0, 1, 1), request(1, 0, 1, 1)});
  const TraceSummary summary = summarize_requests(source);
  EXPECT_EQ(summary.span, 0);
  EXPECT_FALSE(summary.mean_rate_per_s.has_value());
  EXPECT_FALSE(summary.interarrival_cv.has_value());
}

TEST(TraceSummary, FormatsAReadableBlock) {
  auto source = vector_source(small_trace());
  const std::string text = format_trace_summary(summarize_requests(source), "t.csv", "azure");
  EXPECT_EQ(text,
            "request trace       t.csv\n"
            "format              azure\n"
            "requests            5\n"
            "skipped rows        2\n"
            "first arrival       0.000 s\n"
            "last arrival        8.000 s\n"
            "span                8.000 s (0.1 min)\n"
            "mean rate           0.500 req/s\n"
            "inter-arrival CV    0.500\n"
            "  tokens         min       p50       p90       p95       p99       max        mean\n"
            "  input           10        20       100       100       100       100        36.0\n"
            "  output           1         3         5         5         5         5         3.0\n");

  auto lengths = vector_source({request(0, std::nullopt, 3, 4)});
  const std::string length_text =
      format_trace_summary(summarize_requests(lengths), "l.csv", "vidur");
  EXPECT_NE(length_text.find("arrivals            none (lengths only; arrivals come from the "
                             "scenario)\n"),
            std::string::npos);
  EXPECT_EQ(length_text.find("mean rate"), std::string::npos);
}

TEST(TraceSummary, AzureConversationTrace) {
  const std::string path = test_support::shared_trace("azure_llm_2023_conv.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  auto source = traces::open_request_trace(path);
  const TraceSummary summary = summarize_requests(*source);
  EXPECT_EQ(summary.format, "azure");
  EXPECT_EQ(summary.requests, 19'366);
  EXPECT_EQ(summary.span, 3'501'721'937'000);
  ASSERT_TRUE(summary.mean_rate_per_s.has_value());
  EXPECT_NEAR(*summary.mean_rate_per_s, 19'365.0 / 3'501.721937, 1e-9);
  ASSERT_TRUE(summary.interarrival_cv.has_value());
  // Near-Poisson arrivals.
  EXPECT_GT(*summary.interarrival_cv, 0.8);
  EXPECT_LT(*summary.interarrival_cv, 1.5);
  EXPECT_LE(summary.input.p50, summary.input.p99);
  EXPECT_EQ(summary.output.max, 1000);
}

}  // namespace
}  // namespace exitsim::analysis
