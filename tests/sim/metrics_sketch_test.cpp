#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "exitsim/core/nearest_rank.hpp"
#include "exitsim/sim/metrics/latency_sketch.hpp"

namespace exitsim::sim {
namespace {

constexpr double k_alpha = LatencySketch::k_default_relative_error;
constexpr double k_quantiles[] = {0.001, 0.01, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};

// The exact nearest-rank quantile of `values` (sorted).
double exact_quantile(const std::vector<TimeNs>& sorted, double q) {
  const std::int64_t rank = core::nearest_rank(q, static_cast<std::int64_t>(sorted.size()));
  return static_cast<double>(sorted[static_cast<std::size_t>(rank - 1)]);
}

template <typename Distribution>
std::vector<TimeNs> draw(Distribution distribution, std::uint64_t seed, int n) {
  std::mt19937_64 engine(seed);
  std::vector<TimeNs> values;
  values.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    values.push_back(std::max<TimeNs>(0, std::llround(distribution(engine))));
  return values;
}

void expect_within_bound(std::vector<TimeNs> values, double alpha) {
  LatencySketch sketch(alpha);
  for (TimeNs v : values)
    sketch.add(v);
  std::sort(values.begin(), values.end());
  for (double q : k_quantiles) {
    const double truth = exact_quantile(values, q);
    const double estimate = sketch.quantile(q);
    if (truth == 0) {
      EXPECT_EQ(estimate, 0) << "q=" << q;
      continue;
    }
    EXPECT_LE(std::abs(estimate - truth) / truth, alpha * (1 + 1e-9))
        << "q=" << q << " truth=" << truth << " estimate=" << estimate;
  }
  EXPECT_EQ(sketch.quantile(0), static_cast<double>(values.front()));
  EXPECT_EQ(sketch.quantile(1), static_cast<double>(values.back()));
}

TEST(LatencySketch, LognormalQuantilesAreWithinTheRelativeError) {
  // Latency-like: median ~ 20 ms with a heavy right tail.
  expect_within_bound(draw(std::lognormal_distribution<double>(std::log(2e7), 1.5), 1, 50'000),
                      k_alpha);
}

TEST(LatencySketch, UniformQuantilesAreWithinTheRelativeError) {
  expect_within_bound(draw(std::uniform_real_distribution<double>(0, 1e9), 2, 50'000), k_alpha);
  // Small integers, where many samples share a value and buckets hold a single integer.
  expect_within_bound(draw(std::uniform_real_distribution<double>(0, 300), 3, 50'000), k_alpha);
}

TEST(LatencySketch, ExponentialQuantilesAreWithinTheRelativeError) {
  expect_within_bound(draw(std::exponential_distribution<double>(1.0 / 5e6), 4, 50'000), k_alpha);
}

TEST(LatencySketch, OtherRelativeErrorsKeepTheirBound) {
  for (double alpha : {1e-4, 0.01, 0.05, 0.5}) {
    SCOPED_TRACE(alpha);
    expect_within_bound(draw(std::lognormal_distribution<double>(std::log(1e6), 2.0), 5, 20'000),
                        alpha);
  }
}

TEST(LatencySketch, CountMinMaxAndMeanAreExact) {
  LatencySketch sketch;
  for (TimeNs v : {7, 3, 1000, 0, 5})
    sketch.add(v);
  EXPECT_EQ(sketch.count(), 5);
  EXPECT_EQ(sketch.min(), 0);
  EXPECT_EQ(sketch.max(), 1000);
  EXPECT_DOUBLE_EQ(sketch.mean(), 1015.0 / 5);
}

TEST(LatencySketch, MeanSurvivesASumBeyond64Bits) {
  constexpr TimeNs big = std::numeric_limits<TimeNs>::max();
  LatencySketch sketch;
  for (int i = 0; i < 6; ++i)
    sketch.add(big);
  sketch.add(big - 6);  // mean = big - 6/7, which rounds to big as a double
  EXPECT_EQ(sketch.mean(), static_cast<double>(big));
  EXPECT_EQ(sketch.quantile(0.5), static_cast<double>(big));
}

TEST(LatencySketch, AddingAValueCountTimesIsCountAdds) {
  // Counts of repeats, zeros among them, and sums that carry past 64 bits within one call.
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<TimeNs> value(0, 80'000'000);
  std::uniform_int_distribution<std::int64_t> count(0, 40);
  LatencySketch counted;
  LatencySketch one_by_one;
  for (int i = 0; i < 3000; ++i) {
    const TimeNs v = i % 10 == 0 ? 0 : value(rng);
    const std::int64_t n = count(rng);
    counted.add(v, n);
    for (std::int64_t k = 0; k < n; ++k)
      one_by_one.add(v);
  }
  constexpr TimeNs big = std::numeric_limits<TimeNs>::max() - 3;
  counted.add(big, 5);  // 5 x (2^63 - 4) carries into the high half of the sum
  for (int k = 0; k < 5; ++k)
    one_by_one.add(big);
  EXPECT_EQ(counted.count(), one_by_one.count());
  EXPECT_EQ(counted.min(), one_by_one.min());
  EXPECT_EQ(counted.max(), one_by_one.max());
  EXPECT_EQ(counted.mean(), one_by_one.mean());
  EXPECT_EQ(counted.bucket_count(), one_by_one.bucket_count());
  for (const double q : k_quantiles)
    EXPECT_EQ(counted.quantile(q), one_by_one.quantile(q)) << q;
  EXPECT_THROW(counted.add(5, -1), std::invalid_argument);
}

TEST(LatencySketch, MergeEqualsOneSketchOverTheUnion) {
  const std::vector<TimeNs> a =
      draw(std::lognormal_distribution<double>(std::log(1e6), 1.0), 6, 10'000);
  const std::vector<TimeNs> b =
      draw(std::exponential_distribution<double>(1.0 / 5e8), 7, 7'000);  // wider range
  LatencySketch left, right, whole;
  for (TimeNs v : a) {
    left.add(v);
    whole.add(v);
  }
  for (TimeNs v : b) {
    right.add(v);
    whole.add(v);
  }
  right.add(0);
  whole.add(0);
  left.merge(right);
  EXPECT_EQ(left.count(), whole.count());
  EXPECT_EQ(left.min(), whole.min());
  EXPECT_EQ(left.max(), whole.max());
  EXPECT_EQ(left.mean(), whole.mean());
  EXPECT_EQ(left.bucket_count(), whole.bucket_count());
  for (double q : k_quantiles)
    EXPECT_EQ(left.quantile(q), whole.quantile(q)) << "q=" << q;
}

TEST(LatencySketch, RepeatedValuesBucketAsFreshOnes) {
  // add() remembers the last value's bucket; runs of repeats and alternations must bucket as a
  // sketch that sees each value once.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<TimeNs> value(1, 50'000'000);
  std::uniform_int_distribution<int> choice(0, 9);
  LatencySketch repeated;
  LatencySketch merged;
  std::vector<TimeNs> recent = {value(rng), value(rng), value(rng)};
  for (int i = 0; i < 20000; ++i) {
    const int c = choice(rng);
    const TimeNs v = c < 3 ? recent[static_cast<std::size_t>(c)] : (c < 5 ? 0 : value(rng));
    if (c >= 5)
      recent[static_cast<std::size_t>(i % 3)] = v;
    repeated.add(v);
    LatencySketch one;
    one.add(v);
    merged.merge(one);
  }
  EXPECT_EQ(repeated.count(), merged.count());
  EXPECT_EQ(repeated.bucket_count(), merged.bucket_count());
  for (const double q : k_quantiles)
    EXPECT_EQ(repeated.quantile(q), merged.quantile(q)) << q;
}

TEST(LatencySketch, MergeWithEmptySketchesChangesNothing) {
  LatencySketch empty, sketch;
  sketch.add(42);
  sketch.merge(empty);
  EXPECT_EQ(sketch.count(), 1);
  empty.merge(sketch);
  EXPECT_EQ(empty.count(), 1);
  EXPECT_EQ(empty.min(), 42);
  EXPECT_EQ(empty.quantile(0.5), 42);
}

TEST(LatencySketch, MergeRejectsADifferentRelativeError) {
  LatencySketch a(0.005), b(0.01);
  EXPECT_THROW(a.merge(b), std::invalid_argument);
}

TEST(LatencySketch, EmptySketchReportsZero) {
  LatencySketch sketch;
  EXPECT_TRUE(sketch.empty());
  EXPECT_EQ(sketch.quantile(0.5), 0);
  EXPECT_EQ(sketch.mean(), 0);
  EXPECT_EQ(sketch.min(), 0);
  EXPECT_EQ(sketch.max(), 0);
}

TEST(LatencySketch, OneSampleIsReportedExactly) {
  LatencySketch sketch;
  sketch.add(123'456'789);
  for (double q : {0.0, 0.5, 0.99, 1.0})
    EXPECT_EQ(sketch.quantile(q), 123'456'789.0);
  EXPECT_EQ(sketch.mean(), 123'456'789.0);
}

TEST(LatencySketch, ZerosHaveTheirOwnExactBucket) {
  LatencySketch sketch;
  for (int i = 0; i < 3; ++i)
    sketch.add(0);
  EXPECT_EQ(sketch.quantile(0.5), 0);
  EXPECT_EQ(sketch.bucket_count(), 0u);
  sketch.add(1000);
  EXPECT_EQ(sketch.quantile(0.75), 0);  // rank 3 of 4
  EXPECT_EQ(sketch.quantile(0.76), 1000);
  EXPECT_EQ(sketch.mean(), 250);
}

TEST(LatencySketch, MemoryIsBoundedByTheValueRange) {
  LatencySketch sketch;
  for (int i = 0; i < 100'000; ++i)
    sketch.add(1'000'000 + i % 7);
  EXPECT_LE(sketch.bucket_count(), 2u);
  sketch.add(1);
  sketch.add(std::numeric_limits<TimeNs>::max());
  const double gamma = (1 + k_alpha) / (1 - k_alpha);
  EXPECT_LE(static_cast<double>(sketch.bucket_count()), std::log(0x1p63) / std::log(gamma) + 2);
}

TEST(LatencySketch, RejectsBadArguments) {
  EXPECT_THROW(LatencySketch(0.0), std::invalid_argument);
  EXPECT_THROW(LatencySketch(1e-5), std::invalid_argument);
  EXPECT_THROW(LatencySketch(0.6), std::invalid_argument);
  EXPECT_THROW(LatencySketch(std::nan("")), std::invalid_argument);
  LatencySketch sketch;
  EXPECT_THROW(sketch.add(-1), std::invalid_argument);
  EXPECT_THROW(sketch.quantile(-0.1), std::invalid_argument);
  EXPECT_THROW(sketch.quantile(1.5), std::invalid_argument);
  EXPECT_THROW(sketch.quantile(std::nan("")), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::sim
