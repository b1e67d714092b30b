// `validate --against`: the reconstructed arrivals follow the benchmark's rate and burstiness,
// the benchmark's figures are computed from its per-request lists, and the comparison reports
// the simulator's median and spread over the arrival seeds.
#include "exitsim/analysis/benchmark_validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "exitsim/core/presets.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

traces::ServingBenchmark synthetic(
    std::size_t n, std::optional<double> rate, double burstiness,
    traces::ServingBenchmarkFormat format = traces::ServingBenchmarkFormat::vllm) {
  traces::ServingBenchmark b;
  b.format = format;
  b.request_rate = rate;
  b.burstiness = burstiness;
  b.duration_s = 1;
  b.requests.resize(n, traces::BenchmarkRequest{
                           10, 2, 1'000'000, {1'000'000}, 1'000'000, std::nullopt, false, ""});
  return b;
}

struct GapStats {
  double mean = 0, cv = 0;
};

GapStats gaps_of(const std::vector<TimeNs>& arrivals) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < arrivals.size(); ++i)
    gaps.push_back(static_cast<double>(arrivals[i] - arrivals[i - 1]) / 1e9);
  double mean = 0;
  for (const double g : gaps)
    mean += g;
  mean /= static_cast<double>(gaps.size());
  double var = 0;
  for (const double g : gaps)
    var += (g - mean) * (g - mean);
  var /= static_cast<double>(gaps.size() - 1);
  return {mean, std::sqrt(var) / mean};
}

TEST(BenchmarkArrivals, FollowTheRateAndTheGammaShape) {
  // 20,000 gaps: the sample mean is within 1% of the truth (standard error cv / sqrt(n), at most
  // 1.4% of it for cv 2) and the CV within about 2% (asked: 3% and 5%).
  for (const double burstiness : {0.25, 1.0, 4.0}) {
    const auto arrivals = benchmark_arrivals(synthetic(20'000, 10.0, burstiness), 7);
    ASSERT_EQ(arrivals.size(), 20'000u);
    EXPECT_EQ(arrivals.front(), 0);
    const GapStats g = gaps_of(arrivals);
    EXPECT_NEAR(g.mean, 0.1, 0.1 * 0.03) << burstiness;
    EXPECT_NEAR(g.cv, 1.0 / std::sqrt(burstiness), 0.05 / std::sqrt(burstiness)) << burstiness;
    for (std::size_t i = 1; i < arrivals.size(); ++i)
      ASSERT_GE(arrivals[i], arrivals[i - 1]);
    // vLLM rescales the sums so that the last send is at n / rate (from the first draw).
    EXPECT_LE(static_cast<double>(arrivals.back()) / 1e9, 20'000 / 10.0);
    EXPECT_GT(static_cast<double>(arrivals.back()) / 1e9, 20'000 / 10.0 - 1.0);
  }
}

TEST(BenchmarkArrivals, SglangIsPoissonFromTimeZero) {
  const auto arrivals =
      benchmark_arrivals(synthetic(20'000, 4.0, 1.0, traces::ServingBenchmarkFormat::sglang), 3);
  const GapStats g = gaps_of(arrivals);
  EXPECT_NEAR(g.mean, 0.25, 0.25 * 0.03);
  EXPECT_NEAR(g.cv, 1.0, 0.05);
}

TEST(BenchmarkArrivals, InfiniteRateIsAllAtOnceAndInfiniteBurstinessIsEven) {
  for (const TimeNs t : benchmark_arrivals(synthetic(50, std::nullopt, 1.0), 1))
    EXPECT_EQ(t, 0);
  const auto even =
      benchmark_arrivals(synthetic(11, 2.0, std::numeric_limits<double>::infinity()), 1);
  for (std::size_t i = 1; i < even.size(); ++i)
    EXPECT_NEAR(static_cast<double>(even[i] - even[i - 1]), 0.5e9, 2.0);
}

// N7: arrivals n / rate seconds long are refused past the simulator's arrival range (2^62 ns),
// naming the file and the key; just inside it they are reconstructed.
TEST(BenchmarkArrivals, ARateWhoseArrivalsLeaveTheArrivalRangeIsRefused) {
  traces::ServingBenchmark b = synthetic(2, 2.0 / 4.6e9, std::numeric_limits<double>::infinity());
  b.path = "r.json";
  const std::vector<TimeNs> inside = benchmark_arrivals(b, 1);
  EXPECT_NEAR(static_cast<double>(inside[1]), 2.3e18, 1e6);
  b.request_rate = 1e-300;
  EXPECT_EQ(test_support::error_of([&] { benchmark_arrivals(b, 1); }),
            "r.json: request_rate: expected a request rate whose reconstructed arrivals span at "
            "most 2^62 ns (about 146 years), found 1e-300 (2 requests over 2e+300 s)");
  b.request_rate = 2.0 / 4.7e9;
  EXPECT_EQ(test_support::error_of([&] { benchmark_arrivals(b, 1); }),
            "r.json: request_rate: expected a request rate whose reconstructed arrivals span at "
            "most 2^62 ns (about 146 years), found 4.25531914893617e-10 (2 requests over "
            "4.7e+09 s)");
}

TEST(BenchmarkArrivals, SeedsDifferAndRepeat) {
  const auto b = synthetic(100, 5.0, 1.0);
  EXPECT_EQ(benchmark_arrivals(b, 1), benchmark_arrivals(b, 1));
  EXPECT_NE(benchmark_arrivals(b, 1), benchmark_arrivals(b, 2));
}

const NamedFigure& named(const std::vector<NamedFigure>& figures, const std::string& name) {
  for (const NamedFigure& f : figures) {
    if (f.name == name)
      return f;
  }
  throw std::runtime_error("no figure " + name);
}

TEST(BenchmarkFigures, ComeFromThePerRequestListsOfTheFixture) {
  const traces::ServingBenchmark b = traces::read_serving_benchmark(
      std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/vllm_result.json");
  const std::vector<NamedFigure> f = benchmark_figures(b);
  ASSERT_EQ(f.size(), 18u);
  EXPECT_DOUBLE_EQ(named(f, "throughput_tokens_per_s").value, 122 / 4.5);
  EXPECT_DOUBLE_EQ(named(f, "throughput_requests_per_s").value, 19 / 4.5);
  EXPECT_DOUBLE_EQ(named(f, "ttft_p50_ms").value, 60.0);  // the 10th of 19 (nearest rank)
  EXPECT_DOUBLE_EQ(named(f, "ttft_p99_ms").value, 69.0);
  EXPECT_NEAR(named(f, "tpot_p50_ms").value, 20.0, 1e-9);  // request 3's 0.14 s / 7 too
  EXPECT_NEAR(named(f, "itl_p99_ms").value, 20.0, 1e-9);   // one 40 ms gap of 102: not p99
  EXPECT_NEAR(named(f, "itl_mean_ms").value, (101 * 20.0 + 40.0) / 102, 1e-9);
  EXPECT_TRUE(named(f, "ttft_p50_ms").judged);
  EXPECT_FALSE(named(f, "ttft_p90_ms").judged);
  // The file's summary agrees with its lists (odd count: numpy's median is the nearest rank).
  EXPECT_TRUE(summary_cross_checks(b).empty());
}

TEST(BenchmarkFigures, ASummaryThatDisagreesIsSaid) {
  const traces::ServingBenchmark b = traces::read_serving_benchmark(
      std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/sglang_result.jsonl");
  // Six TTFTs 100..600 ms: numpy's median 350, the nearest rank 300.
  const std::vector<std::string> notes = summary_cross_checks(b);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("median_ttft_ms is 350 but its per-request records give 300"),
            std::string::npos)
      << notes[0];
}

TEST(CompareWithBenchmark, MedianAndSpreadOverSeeds) {
  std::vector<NamedFigure> bench{{"throughput_tokens_per_s", 100, true},
                                 {"throughput_requests_per_s", 1, true}};
  for (const char* m : {"ttft", "tpot", "itl", "e2e"}) {
    for (const char* q : {"mean", "p50", "p90", "p99"})
      bench.push_back({std::string(m) + "_" + q + "_ms", 10, std::string(q) == "p50"});
  }
  std::vector<sim::MetricsSummary> runs(3);
  const double ttft[] = {9.0, 12.0, 30.0};
  for (int i = 0; i < 3; ++i) {
    runs[static_cast<std::size_t>(i)].throughput_tokens_per_s = 100 + i;
    runs[static_cast<std::size_t>(i)].request_throughput_per_s = 1;
    runs[static_cast<std::size_t>(i)].ttft.p50 = ttft[i];
  }
  const ValidationResult r = compare_with_benchmark("full_depth", bench, runs);
  EXPECT_EQ(r.reference, "benchmark");
  const MetricComparison& t = r.metrics.at(0);
  EXPECT_EQ(t.simulated_seeds, 3);
  EXPECT_DOUBLE_EQ(t.simulated, 101);
  EXPECT_DOUBLE_EQ(t.simulated_seed_min, 100);
  EXPECT_DOUBLE_EQ(t.simulated_seed_max, 102);
  EXPECT_TRUE(t.reference_inside_seed_range);
  const MetricComparison& ttft_p50 = r.metrics.at(3);
  ASSERT_EQ(ttft_p50.metric, "ttft_p50_ms");
  EXPECT_DOUBLE_EQ(ttft_p50.simulated, 12);
  EXPECT_NEAR(ttft_p50.relative_error, 0.2, 1e-12);
  EXPECT_TRUE(ttft_p50.reference_inside_seed_range);  // 10 lies in [9, 30]: passes
  EXPECT_TRUE(ttft_p50.pass);
  // The TPOT p50 was 0 in every run against 10: outside the range, 100% off.
  EXPECT_FALSE(r.metrics.at(7).pass);
  EXPECT_FALSE(r.pass);
  // The table and files carry the spread.
  const std::string text = format_validation(std::span(&r, 1));
  EXPECT_NE(text.find("benchmark      10.00  simulated      12.00 [9.00, 30.00]  error  20.0%"),
            std::string::npos)
      << text;
  const std::string csv = validation_csv(std::span(&r, 1));
  EXPECT_EQ(csv.rfind("strategy,metric,engine,simulated,relative_error,engine_min,engine_max,"
                      "engine_cv,target,pass,simulated_low,simulated_high,simulated_seed_min,"
                      "simulated_seed_max\n",
                      0),
            0u);
  EXPECT_NE(csv.find("full_depth,ttft_p50_ms,10,12,0.2,,,,0.05,true,,,9,30\n"), std::string::npos)
      << csv;
}

}  // namespace
}  // namespace exitsim::analysis

namespace exitsim::analysis {
namespace {

// The finding's case: 42.7k prompt tokens answered in 452 ms by Llama-3.1-70B on 8 A100s, whose
// prefill needs at least 2 x 70.6e9 parameters x 42,700 tokens = 6.0e15 FLOPs (attention aside)
// at 8 x 312 TFLOP/s: 2.41 s. Only a cached prefix explains it; a 5 s TTFT of the same prompt
// is a computed one and is not counted.
TEST(BenchmarkValidation, FirstTokensFasterThanThePromptsComputeFloorSayAPrefixCacheWasWarm) {
  const ModelShape model = *find_model_preset("llama-3.1-70b");
  const HardwareSpec a100 = *find_hardware_preset("a100-80gb");
  traces::ServingBenchmark b;
  traces::BenchmarkRequest cached;
  cached.input_tokens = 42'700;
  cached.output_tokens = 10;
  cached.ttft = 452'000'000;
  traces::BenchmarkRequest computed = cached;
  computed.ttft = 5'000'000'000;
  b.requests = {cached, computed};
  const double floor_ms = 2.0 * static_cast<double>(model.parameter_count()) * 42'700 /
                          (8 * a100.peak_flops_for(model.dtype)) * 1e3;
  ASSERT_GT(floor_ms, 2'400);  // well above the 452 ms measured
  const std::vector<std::string> lines =
      warm_prefix_cache_evidence(b, model, a100, 8, PromptReplay::computed);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(lines[0].rfind("prefix cache: 1 of 2 requests' first tokens came sooner than their "
                           "prompts can be computed at a100-80gb's peak on 8 GPU(s) (e.g. 452 ms "
                           "for 42700 prompt tokens, which take at least ",
                           0),
            0U)
      << lines[0];
  // The same TTFTs on one GPU of a model a tenth the size: every prompt computes in time.
  const ModelShape small = *find_model_preset("llama-3-8b");
  traces::ServingBenchmark quick;
  traces::BenchmarkRequest r = cached;
  r.input_tokens = 1'000;
  quick.requests = {r};
  EXPECT_TRUE(warm_prefix_cache_evidence(quick, small, a100, 1, PromptReplay::computed).empty());
}

}  // namespace
}  // namespace exitsim::analysis
