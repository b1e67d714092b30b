#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "exitsim/sim/metrics/latency_sketch.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {
namespace {

constexpr double k_alpha = LatencySketch::k_default_relative_error;

// Percentiles come from the sketch: within its relative error of the true sample.
#define EXPECT_WITHIN_ALPHA(estimate, truth) \
  EXPECT_NEAR((estimate), (truth), std::abs(truth) * k_alpha * (1 + 1e-9))

RequestRecord request(std::uint64_t id, double arrival_ms, double scheduled_ms,
                      double first_token_ms, double completion_ms, std::int64_t output_tokens) {
  RequestRecord r;
  r.id = RequestId(id);
  r.arrival = from_milliseconds(arrival_ms);
  r.first_scheduled = from_milliseconds(scheduled_ms);
  r.first_token = from_milliseconds(first_token_ms);
  r.completion = from_milliseconds(completion_ms);
  r.input_tokens = 100;
  r.output_tokens = output_tokens;
  return r;
}

// The hand-computed scenario (all times in ms):
//   request  arrival  scheduled  first token  completion  outputs  TTFT  TPOT  E2E  queueing
//   0        0        1          10           40          4        10    10    40   1
//   1        5        10         30           30          1        25    -     25   5
//   2        20       40         50           100         3        30    25    80   20
// Makespan 0 -> 100 ms; 8 output tokens.
std::vector<RequestRecord> three_requests() {
  return {request(0, 0, 1, 10, 40, 4), request(1, 5, 10, 30, 30, 1),
          request(2, 20, 40, 50, 100, 3)};
}

MetricsSummary summarize(const SloTargets& slo) {
  MetricsOptions options;
  options.slo = slo;
  MetricsCollector collector(options);
  for (const RequestRecord& r : three_requests())
    collector.record_request(r);
  return collector.summarize();
}

TEST(MetricsCollector, ThreeRequestsGiveTheHandComputedLatencies) {
  const MetricsSummary s = summarize({});
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.input_tokens, 300);
  EXPECT_EQ(s.output_tokens, 8);
  EXPECT_EQ(s.first_arrival, 0);
  EXPECT_EQ(s.last_completion, 100 * k_ns_per_ms);
  EXPECT_EQ(s.makespan, 100 * k_ns_per_ms);
  EXPECT_DOUBLE_EQ(s.throughput_tokens_per_s, 80.0);
  EXPECT_DOUBLE_EQ(s.request_throughput_per_s, 30.0);

  EXPECT_EQ(s.ttft.count, 3);
  EXPECT_DOUBLE_EQ(s.ttft.mean, 65.0 / 3);
  EXPECT_DOUBLE_EQ(s.ttft.max, 30.0);
  EXPECT_WITHIN_ALPHA(s.ttft.p50, 25.0);
  EXPECT_DOUBLE_EQ(s.ttft.p99, 30.0);  // rank 3 of 3 is the exact maximum

  EXPECT_EQ(s.e2e.count, 3);
  EXPECT_DOUBLE_EQ(s.e2e.mean, 145.0 / 3);
  EXPECT_WITHIN_ALPHA(s.e2e.p50, 40.0);
  EXPECT_DOUBLE_EQ(s.e2e.p90, 80.0);

  EXPECT_EQ(s.queueing.count, 3);
  EXPECT_DOUBLE_EQ(s.queueing.mean, 26.0 / 3);
  EXPECT_WITHIN_ALPHA(s.queueing.p50, 5.0);
  EXPECT_DOUBLE_EQ(s.queueing.max, 20.0);

  EXPECT_DOUBLE_EQ(s.percentile_relative_error, k_alpha);
}

TEST(MetricsCollector, OneTokenOutputsHaveNoTpot) {
  const MetricsSummary s = summarize({});
  EXPECT_EQ(s.tpot.count, 2);  // request 1 has a single output token
  EXPECT_DOUBLE_EQ(s.tpot.mean, 17.5);
  EXPECT_DOUBLE_EQ(s.tpot.p50, 10.0);  // rank 1 of 2: the exact minimum
  EXPECT_DOUBLE_EQ(s.tpot.max, 25.0);
}

TEST(MetricsCollector, TpotIsRoundedToTheNanosecond) {
  MetricsCollector collector(MetricsOptions{});
  RequestRecord r;
  r.first_token = 0;
  r.completion = 10;
  r.output_tokens = 4;  // 10 ns over 3 gaps = 3.33 ns
  collector.record_request(r);
  r.completion = 5;
  r.output_tokens = 3;  // 5 ns over 2 gaps = 2.5 ns, rounded half up
  collector.record_request(r);
  const MetricsSummary s = collector.summarize();
  EXPECT_DOUBLE_EQ(s.tpot.p50, 3e-6);
  EXPECT_DOUBLE_EQ(s.tpot.max, 3e-6);
}

TEST(MetricsCollector, WithoutTargetsEveryRequestMeetsTheSlo) {
  const MetricsSummary s = summarize({});
  EXPECT_DOUBLE_EQ(s.slo_attainment, 1.0);
  EXPECT_TRUE(s.slo_attainment_by_metric.empty());
  EXPECT_DOUBLE_EQ(s.goodput_requests_per_s, s.request_throughput_per_s);
}

TEST(MetricsCollector, SloAttainmentPerMetricAndOverall) {
  SloTargets slo;
  slo.ttft_ms = 28;  // met by requests 0 and 1
  slo.tpot_ms = 20;  // met by 0, vacuously by the one-token request 1, missed by 2 (25 ms)
  slo.e2e_ms = 30;   // met by 1 only
  const MetricsSummary s = summarize(slo);
  ASSERT_EQ(s.slo_attainment_by_metric.size(), 3u);
  EXPECT_DOUBLE_EQ(s.slo_attainment_by_metric.at("ttft"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.slo_attainment_by_metric.at("tpot"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.slo_attainment_by_metric.at("e2e"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.goodput_requests_per_s, 10.0);  // 1 request / 0.1 s
  EXPECT_EQ(s.slo.e2e_ms, 30);
}

TEST(MetricsCollector, ATargetEqualToTheLatencyIsMet) {
  SloTargets slo;
  slo.ttft_ms = 25;  // request 1's TTFT exactly
  const MetricsSummary s = summarize(slo);
  EXPECT_EQ(s.slo_attainment_by_metric.size(), 1u);
  EXPECT_DOUBLE_EQ(s.slo_attainment_by_metric.at("ttft"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.goodput_requests_per_s, 20.0);
}

TEST(MetricsCollector, TpotTargetComparesTheUnroundedTpot) {
  SloTargets slo;
  slo.tpot_ms = 1e-6 * 3;  // 3 ns
  MetricsOptions options;
  options.slo = slo;
  MetricsCollector collector(options);
  RequestRecord r;
  r.completion = 10;
  r.output_tokens = 4;  // 3.33 ns: reported as 3 ns but misses a 3 ns target
  collector.record_request(r);
  EXPECT_DOUBLE_EQ(collector.summarize().slo_attainment, 0.0);
}

TEST(MetricsCollector, InterTokenLatenciesComeFromTokenGaps) {
  MetricsCollector collector(MetricsOptions{});
  for (TimeNs gap : {2 * k_ns_per_ms, 4 * k_ns_per_ms, TimeNs{0}, 6 * k_ns_per_ms})
    collector.record_token_gap(gap);
  const MetricsSummary s = collector.summarize();
  EXPECT_EQ(s.itl.count, 4);
  EXPECT_DOUBLE_EQ(s.itl.mean, 3.0);
  EXPECT_WITHIN_ALPHA(s.itl.p50, 2.0);
  EXPECT_DOUBLE_EQ(s.itl.max, 6.0);
  EXPECT_EQ(s.requests, 0);
}

TEST(MetricsCollector, BatchSizeHistogramIsExact) {
  MetricsCollector collector(MetricsOptions{});
  TimeNs t = 0;
  for (std::int64_t sequences : {1, 4, 4, 8, 4, 0}) {
    IterationRecord it;
    it.start = t;
    it.duration = sequences;  // a zero-duration iteration still counts
    it.sequences = sequences;
    collector.record_iteration(it);
    t += sequences;
  }
  collector.record_preemption();
  collector.record_preemption();
  const MetricsSummary s = collector.summarize();
  EXPECT_EQ(s.iterations, 6);
  const std::map<std::int64_t, std::int64_t> expected{{0, 1}, {1, 1}, {4, 3}, {8, 1}};
  EXPECT_EQ(s.batch_size_histogram, expected);
  EXPECT_DOUBLE_EQ(s.mean_batch_size, 21.0 / 6);
  EXPECT_EQ(s.preemptions, 2);
}

TEST(MetricsCollector, EmptyCollectorSummarizesToZeros) {
  const MetricsSummary s = MetricsCollector(MetricsOptions{}).summarize();
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.makespan, 0);
  EXPECT_EQ(s.throughput_tokens_per_s, 0);
  EXPECT_EQ(s.goodput_requests_per_s, 0);
  EXPECT_EQ(s.slo_attainment, 0);
  EXPECT_EQ(s.ttft.count, 0);
  EXPECT_EQ(s.ttft.p99, 0);
  EXPECT_EQ(s.mean_batch_size, 0);
  EXPECT_TRUE(s.series.empty());
  EXPECT_EQ(s.series_window, k_ns_per_s);
}

TEST(MetricsCollector, RejectsInconsistentRecords) {
  MetricsCollector collector(MetricsOptions{});
  RequestRecord r = request(0, 10, 5, 20, 30, 2);  // scheduled before it arrived
  EXPECT_THROW(collector.record_request(r), std::invalid_argument);
  r = request(0, 0, 0, 20, 10, 2);  // completed before its first token
  EXPECT_THROW(collector.record_request(r), std::invalid_argument);
  r = request(0, 0, 0, 10, 10, 0);  // no output
  EXPECT_THROW(collector.record_request(r), std::invalid_argument);
  r = request(0, 0, 0, 10, 10, 1);
  r.replica = 1;  // the collector was told of one replica
  EXPECT_THROW(collector.record_request(r), std::invalid_argument);
  EXPECT_THROW(collector.record_token_gap(-1), std::invalid_argument);
  IterationRecord it;
  it.sequences = -1;
  EXPECT_THROW(collector.record_iteration(it), std::invalid_argument);
  EXPECT_EQ(collector.summarize().requests, 0);
  EXPECT_EQ(collector.summarize().iterations, 0);
}

TEST(MetricsCollector, RejectsBadOptions) {
  MetricsOptions options;
  options.replicas = 0;
  EXPECT_THROW(MetricsCollector{options}, std::invalid_argument);
  options = {};
  options.series_window = 0;
  EXPECT_THROW(MetricsCollector{options}, std::invalid_argument);
  options = {};
  options.max_series_points = 1;
  EXPECT_THROW(MetricsCollector{options}, std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::sim
