#include "exitsim/analysis/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
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
  EngineRunMeasurement engine;
  sim::MetricsSummary simulated;
  engine.summary.throughput_tokens_per_s = 100;
  simulated.throughput_tokens_per_s = 95;
  engine.summary.ttft.p50 = 2.0;  // ms
  simulated.ttft.p50 = 2.2;
  engine.iterations = {1000};
  const std::vector<TimeNs> it = {1000};
  const ValidationResult r = compare_runs("depthwise", std::span(&engine, 1), simulated, it);
  ASSERT_EQ(r.metrics.size(), 12U);
  EXPECT_EQ(r.metrics[0].metric, "throughput_tokens_per_s");
  EXPECT_NEAR(r.metrics[0].relative_error, 0.05, 1e-12);
  EXPECT_TRUE(r.metrics[0].pass);  // 5% is the target
  EXPECT_EQ(r.metrics[1].metric, "ttft_p50_ms");
  EXPECT_NEAR(r.metrics[1].engine, 2.0, 1e-12);
  EXPECT_NEAR(r.metrics[1].relative_error, 0.1, 1e-12);
  // One run has no range to fall inside: 10% off a 5% target fails.
  EXPECT_FALSE(r.metrics[1].pass);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.metrics[2].relative_error, 0.0);  // both 0
  EXPECT_EQ(r.metrics[10].metric, "queueing_p50_ms");

  const std::vector<ValidationResult> all = {r};
  const std::string csv = validation_csv(all);
  EXPECT_EQ(csv.rfind("strategy,metric,engine,simulated,relative_error,engine_min,engine_max,"
                      "engine_cv,target,pass,simulated_low,simulated_high\n",
                      0),
            0U);
  EXPECT_NE(csv.find("depthwise,throughput_tokens_per_s,100,95,0.05,100,100,0,0.05,true,,\n"),
            std::string::npos);
  EXPECT_NE(csv.find("depthwise,ttft_p50_ms,2,2.2,0.1,2,2,0,0.05,false,,\n"), std::string::npos);
  EXPECT_NE(csv.find("depthwise,iteration_ape_p50,,,0,,,,0.08,true,,\n"), std::string::npos);
  EXPECT_NE(format_validation(all).find("depthwise: iterations engine 1 / simulated 1"),
            std::string::npos);
}

// Five engine runs spread 90..110 tokens/s around 100: a prediction of 107 is 7% off the median,
// over the 5% target, yet inside what the engine itself measured, so it passes; 115 is outside
// and fails. The spread's CV is the sample standard deviation over the mean.
TEST(CompareRuns, JudgesAgainstTheEnginesOwnRangeOverRepeats) {
  std::vector<EngineRunMeasurement> runs(5);
  const std::vector<double> throughputs = {100, 90, 110, 95, 105};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].summary.throughput_tokens_per_s = throughputs[i];
    runs[i].iterations = {1000, 1000};
    // Same-batch pricing 2%, 4%, 6%, 8%, 10% off: the median run's is 6%.
    runs[i].priced_steps = {static_cast<TimeNs>(1000 + 20 * (i + 1)),
                            static_cast<TimeNs>(1000 + 20 * (i + 1))};
  }
  sim::MetricsSummary simulated;
  simulated.throughput_tokens_per_s = 107;
  const std::vector<TimeNs> it = {1000, 1000};
  ValidationResult r = compare_runs("full_depth", runs, simulated, it);
  const MetricComparison& t = r.metrics[0];
  EXPECT_EQ(t.engine_runs, 5);
  EXPECT_EQ(t.engine, 100);
  EXPECT_EQ(t.engine_min, 90);
  EXPECT_EQ(t.engine_max, 110);
  EXPECT_NEAR(t.engine_cv, std::sqrt(62.5) / 100, 1e-12);
  EXPECT_NEAR(t.relative_error, 0.07, 1e-12);
  EXPECT_TRUE(t.inside_engine_range);
  EXPECT_TRUE(t.pass);
  ASSERT_TRUE(r.same_batches.has_value());
  EXPECT_NEAR(r.same_batches->median_ape, 0.06, 1e-12);
  EXPECT_EQ(r.same_batch_median_by_run.size(), 5U);
  EXPECT_FALSE(r.pass);  // 6% same-batch error is over its 5% target

  simulated.throughput_tokens_per_s = 115;
  r = compare_runs("full_depth", runs, simulated, it);
  EXPECT_FALSE(r.metrics[0].inside_engine_range);
  EXPECT_FALSE(r.metrics[0].pass);
}

// Near a queue's knee a figure moves far more than the prices: the TPOT below moves 60% for
// prices 5% off, so validation says it cannot be predicted to its 5% target there, while
// throughput, which the arrivals set, moves 1% and is not flagged.
TEST(PriceBand, NamesTheFiguresThePricesPrecisionCannotPredict) {
  EngineRunMeasurement engine;
  engine.summary.throughput_tokens_per_s = 100;
  engine.summary.tpot.p50 = 2.0;
  engine.iterations = {1000};
  sim::MetricsSummary simulated = engine.summary;
  const std::vector<TimeNs> it = {1000};
  ValidationResult r = compare_runs("full_depth", std::span(&engine, 1), simulated, it);
  sim::MetricsSummary lower = simulated;
  sim::MetricsSummary upper = simulated;
  lower.throughput_tokens_per_s = 99;
  upper.throughput_tokens_per_s = 100.5;
  lower.tpot.p50 = 1.9;
  upper.tpot.p50 = 3.2;  // the knee: 5% dearer steps push decodes behind prefills
  add_price_band(r, 0.05, lower, upper);
  EXPECT_EQ(r.price_change, 0.05);
  const MetricComparison& throughput = r.metrics[0];
  EXPECT_EQ(throughput.simulated_low, 99);
  EXPECT_EQ(throughput.simulated_high, 100.5);
  EXPECT_NEAR(throughput.price_sensitivity(), 0.01, 1e-12);
  const MetricComparison& tpot = r.metrics[4];
  ASSERT_EQ(tpot.metric, "tpot_p50_ms");
  EXPECT_EQ(tpot.simulated_low, 1.9);
  EXPECT_EQ(tpot.simulated_high, 3.2);
  EXPECT_NEAR(tpot.price_sensitivity(), 0.6, 1e-12);
  EXPECT_TRUE(tpot.pass);  // the band is evidence, not a looser judgement

  const std::vector<ValidationResult> all = {r};
  const std::string text = format_validation(all);
  EXPECT_NE(text.find("tpot_p50_ms"), std::string::npos);
  EXPECT_NE(text.find("[1.90, 3.20] (prices off by the profile's 5.0% move it 60%: not "
                      "predictable to 5% here)"),
            std::string::npos);
  EXPECT_EQ(text.find("[99.00, 100.50] (prices"), std::string::npos);
  EXPECT_NE(validation_csv(all).find("full_depth,tpot_p50_ms,2,2,0,2,2,0,0.05,true,1.9,3.2\n"),
            std::string::npos);
  const std::string json = validation_json(all, {});
  EXPECT_NE(json.find("\"simulated_high\": 3.2"), std::string::npos);
  EXPECT_NE(json.find("\"price_change\": 0.05"), std::string::npos);
}

TEST(PriceBand, AbsentWithoutABandAndTheCsvKeepsItsColumns) {
  EngineRunMeasurement engine;
  engine.summary.tpot.p50 = 2.0;
  engine.iterations = {1000};
  const std::vector<TimeNs> it = {1000};
  const ValidationResult r = compare_runs("full_depth", std::span(&engine, 1), engine.summary, it);
  EXPECT_EQ(r.price_change, 0.0);
  EXPECT_EQ(r.metrics[4].price_sensitivity(), 0.0);
  const std::vector<ValidationResult> all = {r};
  EXPECT_EQ(format_validation(all).find("simulated in brackets"), std::string::npos);
  EXPECT_EQ(validation_json(all, {}).find("simulated_low"), std::string::npos);
  // Every row has the header's 12 columns.
  const std::string csv = validation_csv(all);
  std::size_t begin = 0;
  while (begin < csv.size()) {
    const std::size_t end = csv.find('\n', begin);
    EXPECT_EQ(std::count(csv.begin() + static_cast<std::ptrdiff_t>(begin),
                         csv.begin() + static_cast<std::ptrdiff_t>(end), ','),
              11)
        << csv.substr(begin, end - begin);
    begin = end + 1;
  }
}

TEST(SpeedCheck, SaysWhenTheMachineIsSlowerThanAtCalibration) {
  SpeedCheck speed;
  speed.calibration_us = 100;
  speed.start_us = 118;
  speed.end_us = 122;
  EXPECT_NEAR(speed.change(), 0.20, 1e-12);
  EXPECT_NE(speed.describe().find("20.0% slower now (WARNING: beyond 10%"), std::string::npos)
      << speed.describe();
  speed.start_us = speed.end_us = 104;
  EXPECT_EQ(speed.describe().find("WARNING"), std::string::npos) << speed.describe();
  speed.calibration_us = 0;  // a profile from before the probe
  EXPECT_EQ(speed.change(), 0.0);
  EXPECT_NE(speed.describe().find("no reading to compare with"), std::string::npos);
}

}  // namespace
}  // namespace exitsim::analysis
