#include "exitsim/analysis/validation.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace exitsim::analysis {
namespace {

TEST(CompareIterations, MatchesInOrderAndTakesNearestRankPercentiles) {
  // Errors 0%, 10%, 20%, ..., 90% on ten iterations of 1 ms.
  std::vector<TimeNs> engine(10, 1'000'000);
  std::vector<TimeNs> simulated;
  for (int i = 0; i < 10; ++i)
    simulated.push_back(1'000'000 + (i % 2 == 0 ? 1 : -1) * i * 100'000);
  simulated.push_back(5);  // one more simulated iteration: counted, not matched
  const IterationError e = compare_iterations(engine, simulated);
  EXPECT_EQ(e.engine_iterations, 10);
  EXPECT_EQ(e.simulated_iterations, 11);
  EXPECT_EQ(e.matched, 10);
  EXPECT_NEAR(e.median_ape, 0.4, 1e-12);  // the 5th of 10 sorted errors
  EXPECT_NEAR(e.p90_ape, 0.8, 1e-12);     // the 9th
  EXPECT_NEAR(e.engine_mean_us, 1000, 1e-9);
}

TEST(CompareIterations, SkipsIterationsMeasuredAsZero) {
  const std::vector<TimeNs> engine = {0, 100};
  const std::vector<TimeNs> simulated = {50, 110};
  const IterationError e = compare_iterations(engine, simulated);
  EXPECT_NEAR(e.median_ape, 0.1, 1e-12);
  EXPECT_NEAR(e.p90_ape, 0.1, 1e-12);
}

TEST(CompareIterations, AWildPriceGivesAWildErrorNotAnOverflow) {
  const std::vector<TimeNs> engine = {3'000'000'000, 100};
  const std::vector<TimeNs> simulated = {std::numeric_limits<TimeNs>::min(), 100};
  const IterationError e = compare_iterations(engine, simulated);
  EXPECT_GT(e.p90_ape, 1e9);
  EXPECT_EQ(e.median_ape, 0.0);
}

TEST(CompareRuns, ReportsThroughputAndLatencyPercentiles) {
  sim::MetricsSummary engine, simulated;
  engine.throughput_tokens_per_s = 100;
  simulated.throughput_tokens_per_s = 95;
  engine.ttft.p50 = 2.0;  // ms
  simulated.ttft.p50 = 2.2;
  const std::vector<TimeNs> it = {1000};
  const ValidationResult r = compare_runs("depthwise", engine, simulated, it, it);
  ASSERT_EQ(r.metrics.size(), 10U);
  EXPECT_EQ(r.metrics[0].metric, "throughput_tokens_per_s");
  EXPECT_NEAR(r.metrics[0].relative_error, 0.05, 1e-12);
  EXPECT_EQ(r.metrics[1].metric, "ttft_p50_ms");
  EXPECT_NEAR(r.metrics[1].engine, 2.0, 1e-12);
  EXPECT_NEAR(r.metrics[1].relative_error, 0.1, 1e-12);
  EXPECT_EQ(r.metrics[2].relative_error, 0.0);  // both 0

  const std::vector<ValidationResult> all = {r};
  const std::string csv = validation_csv(all);
  EXPECT_EQ(csv.rfind("strategy,metric,engine,simulated,relative_error\n", 0), 0U);
  EXPECT_NE(csv.find("depthwise,throughput_tokens_per_s,100,95,0.05\n"), std::string::npos);
  EXPECT_NE(csv.find("depthwise,iteration_ape_p50,,,0\n"), std::string::npos);
  EXPECT_NE(format_validation(all).find("depthwise: iterations engine 1 / simulated 1"),
            std::string::npos);
}

}  // namespace
}  // namespace exitsim::analysis
