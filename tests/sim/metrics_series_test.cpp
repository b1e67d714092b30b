#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {
namespace {

IterationRecord iteration(int replica, TimeNs start, TimeNs duration, std::int64_t used,
                          std::int64_t total) {
  IterationRecord it;
  it.replica = replica;
  it.start = start;
  it.duration = duration;
  it.sequences = 1;
  it.kv_blocks_used = used;
  it.kv_blocks_total = total;
  return it;
}

MetricsOptions series_options(int replicas, TimeNs window, std::size_t max_points) {
  MetricsOptions options;
  options.replicas = replicas;
  options.series_window = window;
  options.max_series_points = max_points;
  return options;
}

struct Expected {
  TimeNs start;
  double kv_usage;
  double utilization;
};

void expect_series(const MetricsSummary& s, const std::vector<Expected>& expected) {
  ASSERT_EQ(s.series.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s.series[i].start, expected[i].start);
    EXPECT_DOUBLE_EQ(s.series[i].kv_usage, expected[i].kv_usage);
    EXPECT_DOUBLE_EQ(s.series[i].utilization, expected[i].utilization);
  }
}

TEST(MetricsSeries, AnIterationIsSplitExactlyAcrossWindows) {
  MetricsCollector collector(series_options(1, 100, 64));
  collector.record_iteration(iteration(0, 50, 200, 1, 2));  // [50, 250) at half the blocks
  const MetricsSummary s = collector.summarize();
  EXPECT_EQ(s.series_window, 100);
  // The series ends with the iteration at 250, so the last window is 50 ns wide.
  expect_series(s, {{0, 0.25, 0.5}, {100, 0.5, 1.0}, {200, 0.5, 1.0}});
}

TEST(MetricsSeries, IdleTimeKeepsTheLastKnownUsage) {
  MetricsCollector collector(series_options(1, 100, 64));
  collector.record_iteration(iteration(0, 0, 100, 4, 10));
  collector.record_iteration(iteration(0, 300, 50, 8, 10));
  collector.record_iteration(iteration(0, 350, 50, 2, 10));
  expect_series(collector.summarize(),
                {{0, 0.4, 1.0}, {100, 0.4, 0.0}, {200, 0.4, 0.0}, {300, 0.5, 1.0}});
}

TEST(MetricsSeries, UsageAndUtilizationAreAveragedOverReplicas) {
  MetricsCollector collector(series_options(2, 100, 64));
  collector.record_iteration(iteration(0, 0, 100, 1, 4));
  // Replica 1 starts late: it used no blocks before its first iteration.
  collector.record_iteration(iteration(1, 150, 50, 1, 1));
  // Replica 0 is idle in [100, 200) holding a quarter of its blocks.
  expect_series(collector.summarize(),
                {{0, 0.125, 0.5}, {100, (0.25 * 100 + 1.0 * 50) / 200, 50.0 / 200}});
}

TEST(MetricsSeries, BackToBackIterationsGiveFullUtilization) {
  MetricsCollector collector(series_options(2, 100, 64));
  for (int replica = 0; replica < 2; ++replica) {
    for (TimeNs t = 0; t < 1000; t += 30)
      collector.record_iteration(iteration(replica, t, 30, 3, 4));  // ends at 1020
  }
  const MetricsSummary s = collector.summarize();
  ASSERT_EQ(s.series.size(), 11u);
  for (const SeriesPoint& point : s.series) {
    EXPECT_DOUBLE_EQ(point.utilization, 1.0);
    EXPECT_DOUBLE_EQ(point.kv_usage, 0.75);
  }
}

TEST(MetricsSeries, WindowsDoubleWhenThePointBudgetIsExceeded) {
  MetricsCollector collector(series_options(1, 10, 4));
  collector.record_iteration(iteration(0, 0, 40, 1, 1));  // fills the four 10 ns windows
  EXPECT_EQ(collector.summarize().series_window, 10);
  EXPECT_EQ(collector.summarize().series.size(), 4u);
  collector.record_iteration(iteration(0, 40, 10, 0, 1));  // a fifth: pairs merge into 20 ns
  MetricsSummary s = collector.summarize();
  EXPECT_EQ(s.series_window, 20);
  expect_series(s, {{0, 1.0, 1.0}, {20, 1.0, 1.0}, {40, 0.0, 1.0}});
  // Idle until 165 at usage 0, then busy to 170 at full usage: 170 ns needs 80 ns windows.
  collector.record_iteration(iteration(0, 165, 5, 1, 1));
  s = collector.summarize();
  EXPECT_EQ(s.series_window, 80);
  expect_series(s, {{0, 40.0 / 80, 50.0 / 80}, {80, 0.0, 0.0}, {160, 5.0 / 10, 5.0 / 10}});
}

TEST(MetricsSeries, DoubledSeriesEqualsOneBuiltAtTheFinalWidth) {
  std::vector<IterationRecord> iterations;
  TimeNs t[3] = {0, 5, 11};
  for (int i = 0; i < 600; ++i) {
    const int replica = i % 3;
    const TimeNs duration = 3 + (i * 7) % 13;
    iterations.push_back(iteration(replica, t[replica], duration, i % 17, 16 + replica));
    t[replica] += duration + (i % 5 == 0 ? 9 : 0);  // occasional idle gaps
  }
  MetricsCollector doubling(series_options(3, 7, 16));
  for (const IterationRecord& it : iterations)
    doubling.record_iteration(it);
  const MetricsSummary a = doubling.summarize();
  ASSERT_GT(a.series_window, 7 * 8);  // it doubled several times
  MetricsCollector direct(series_options(3, a.series_window, 4096));
  for (const IterationRecord& it : iterations)
    direct.record_iteration(it);
  const MetricsSummary b = direct.summarize();
  ASSERT_EQ(b.series_window, a.series_window);
  ASSERT_LE(a.series.size(), 16u);
  ASSERT_EQ(a.series.size(), b.series.size());
  for (std::size_t i = 0; i < a.series.size(); ++i) {
    EXPECT_EQ(a.series[i].start, b.series[i].start);
    EXPECT_NEAR(a.series[i].kv_usage, b.series[i].kv_usage, 1e-12);
    EXPECT_DOUBLE_EQ(a.series[i].utilization, b.series[i].utilization);
  }
}

TEST(MetricsSeries, RejectsInconsistentIterations) {
  MetricsCollector collector(series_options(2, 100, 64));
  collector.record_iteration(iteration(0, 100, 50, 1, 2));
  EXPECT_THROW(collector.record_iteration(iteration(0, 120, 10, 1, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(2, 0, 10, 1, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(-1, 0, 10, 1, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(1, 0, 10, 3, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(1, -5, 10, 1, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(1, 0, -1, 1, 2)), std::invalid_argument);
  EXPECT_THROW(collector.record_iteration(iteration(1, 1, INT64_MAX, 1, 2)), std::invalid_argument);
  // Replica 1 may still run earlier than replica 0's last iteration.
  collector.record_iteration(iteration(1, 0, 10, 1, 2));
  EXPECT_EQ(collector.summarize().iterations, 2);
}

TEST(MetricsSeries, IterationsWithoutKvAccountingCountAsUsingNone) {
  MetricsCollector collector(series_options(1, 100, 64));
  collector.record_iteration(iteration(0, 0, 100, 0, 0));
  expect_series(collector.summarize(), {{0, 0.0, 1.0}});
}

}  // namespace
}  // namespace exitsim::sim
