#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/workload/arrivals.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

struct GapStats {
  double rate = 0.0;  // arrivals per second over the span
  double cv = 0.0;    // coefficient of variation of the inter-arrival gaps
};

std::vector<TimeNs> draw(ArrivalProcess& process, int n) {
  std::vector<TimeNs> times;
  times.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    times.push_back(process.next());
  return times;
}

GapStats gap_stats(const std::vector<TimeNs>& times) {
  double mean = 0.0;
  double m2 = 0.0;
  for (std::size_t i = 1; i < times.size(); ++i) {
    EXPECT_GE(times[i], times[i - 1]);
    const double gap = to_seconds(times[i] - times[i - 1]);
    const double delta = gap - mean;
    mean += delta / static_cast<double>(i);
    m2 += delta * (gap - mean);
  }
  const double gaps = static_cast<double>(times.size() - 1);
  return {gaps / to_seconds(times.back() - times.front()), std::sqrt(m2 / (gaps - 1)) / mean};
}

scenario::ArrivalConfig config(const char* process, double rate) {
  scenario::ArrivalConfig c;
  c.process = process;
  c.rate = rate;
  return c;
}

std::string error_of(const scenario::ArrivalConfig& c) {
  return test_support::error_of(
      [&] { make_arrival_process(c, RandomStream(1, "workload.arrivals")); });
}

TEST(PoissonArrivals, StartsAtZeroWithTheConfiguredRateAndUnitCv) {
  PoissonArrivals process(50.0, RandomStream(11, "workload.arrivals"));
  const std::vector<TimeNs> times = draw(process, 200'000);
  EXPECT_EQ(times.front(), 0);
  const GapStats stats = gap_stats(times);
  // Relative standard error of both estimates is about 1/sqrt(n) ~ 0.22%.
  EXPECT_NEAR(stats.rate, 50.0, 50.0 * 0.01);
  EXPECT_NEAR(stats.cv, 1.0, 0.015);
}

TEST(PoissonArrivals, IsDeterministicPerSeed) {
  PoissonArrivals a(10.0, RandomStream(3, "workload.arrivals"));
  PoissonArrivals b(10.0, RandomStream(3, "workload.arrivals"));
  PoissonArrivals c(10.0, RandomStream(4, "workload.arrivals"));
  const std::vector<TimeNs> ta = draw(a, 1000);
  EXPECT_EQ(ta, draw(b, 1000));
  EXPECT_NE(ta, draw(c, 1000));
}

struct GammaCase {
  double cv;
  double tolerance;  // relative, on both the rate and the measured cv
};

class GammaArrivalsCv : public ::testing::TestWithParam<GammaCase> {};

TEST_P(GammaArrivalsCv, MatchesTheConfiguredRateAndCv) {
  const GammaCase param = GetParam();
  GammaArrivals process(100.0, param.cv, RandomStream(12, "workload.arrivals"));
  const GapStats stats = gap_stats(draw(process, 200'000));
  EXPECT_NEAR(stats.rate, 100.0, 100.0 * param.tolerance);
  EXPECT_NEAR(stats.cv, param.cv, param.cv * param.tolerance);
}

// Standard errors: rate cv/sqrt(n) (0.1% .. 0.7%); cv sqrt((2 + 6 cv^2) / n) / 2 (0.2% .. 1.7%).
INSTANTIATE_TEST_SUITE_P(Cvs, GammaArrivalsCv,
                         ::testing::Values(GammaCase{0.5, 0.02}, GammaCase{1.0, 0.02},
                                           GammaCase{3.0, 0.06}));

TEST(ConstantArrivals, AreEvenlySpacedWithZeroCv) {
  ConstantArrivals process(4.0);
  const std::vector<TimeNs> times = draw(process, 1000);
  for (std::size_t i = 0; i < times.size(); ++i) {
    ASSERT_EQ(times[i], static_cast<TimeNs>(i) * 250 * k_ns_per_ms);
  }
  EXPECT_EQ(gap_stats(times).cv, 0.0);
}

TEST(ConstantArrivals, DoNotDriftWhenTheGapIsNotAWholeNanosecond) {
  ConstantArrivals process(3.0);
  const std::vector<TimeNs> times = draw(process, 3001);
  EXPECT_EQ(times[1], 333'333'333);
  EXPECT_EQ(times[2], 666'666'667);
  EXPECT_EQ(times[3000], 1000 * k_ns_per_s);
  EXPECT_LT(gap_stats(times).cv, 1e-8);
}

TEST(OnOffArrivals, ArriveOnlyInOnPeriodsAtTheDutyCycleRate) {
  OnOffArrivals process(100.0, 1.0, 3.0, RandomStream(13, "workload.arrivals"));
  const std::vector<TimeNs> times = draw(process, 100'000);
  EXPECT_EQ(times.front(), 0);
  for (const TimeNs t : times)
    ASSERT_LT(t % (4 * k_ns_per_s), k_ns_per_s) << t;
  // rate * on / (on + off) = 25/s; counting noise ~0.3%.
  EXPECT_NEAR(gap_stats(times).rate, 25.0, 25.0 * 0.02);
}

TEST(OnOffArrivals, WithoutOffPeriodsArePoisson) {
  OnOffArrivals process(20.0, 0.5, 0.0, RandomStream(14, "workload.arrivals"));
  const GapStats stats = gap_stats(draw(process, 100'000));
  EXPECT_NEAR(stats.rate, 20.0, 20.0 * 0.015);
  EXPECT_NEAR(stats.cv, 1.0, 0.02);
}

TEST(MakeArrivalProcess, BuildsEachProcess) {
  for (const char* name : {"poisson", "gamma", "constant", "on_off"}) {
    scenario::ArrivalConfig c = config(name, 10.0);
    c.on_seconds = 1.0;
    const auto process = make_arrival_process(c, RandomStream(1, "workload.arrivals"));
    EXPECT_EQ(process->next(), 0) << name;
    EXPECT_GT(process->next(), 0) << name;
  }
}

TEST(MakeArrivalProcess, RejectsImpossibleConfigurations) {
  EXPECT_EQ(error_of(config("poisson", 0.0)),
            "workload.arrivals.rate: expected a rate > 0 requests/s, found 0");
  EXPECT_EQ(error_of(config("constant", -2.5)),
            "workload.arrivals.rate: expected a rate > 0 requests/s, found -2.5");
  EXPECT_EQ(error_of(config("poisson", std::nan(""))),
            "workload.arrivals.rate: expected a rate > 0 requests/s, found nan");
  scenario::ArrivalConfig gamma = config("gamma", 1.0);
  gamma.cv = 0.0;
  EXPECT_EQ(error_of(gamma),
            "workload.arrivals.cv: expected a coefficient of variation > 0, found 0");
  scenario::ArrivalConfig on_off = config("on_off", 1.0);
  on_off.on_seconds = 0.0;
  EXPECT_EQ(error_of(on_off), "workload.arrivals.on_seconds: expected an on period > 0 s, found 0");
  on_off.on_seconds = 1.0;
  on_off.off_seconds = -1.0;
  EXPECT_EQ(error_of(on_off),
            "workload.arrivals.off_seconds: expected an off period >= 0 s, found -1");
  on_off.off_seconds = 1e300;
  EXPECT_EQ(error_of(on_off),
            "workload.arrivals.off_seconds: expected a duration within the arrival range (2^62 "
            "ns, about 146 years), found 1e+300 s");
  EXPECT_EQ(error_of(config("gama", 1.0)),
            "workload.arrivals.process: expected one of poisson, gamma, constant, on_off, found "
            "'gama' (did you mean 'gamma'?)");
  EXPECT_EQ(
      error_of(config("", 1.0)),
      "workload.arrivals.process: expected one of poisson, gamma, constant, on_off, found ''");
}

TEST(MakeArrivalProcess, FailsInsteadOfOverflowingTheClock) {
  PoissonArrivals process(1e-12, RandomStream(1, "workload.arrivals"));
  process.next();
  EXPECT_EQ(test_support::error_of([&] {
              for (int i = 0; i < 100; ++i)
                process.next();
            }),
            "workload.arrivals.rate: expected a rate whose arrivals stay within 2^62 ns (about 146 "
            "years), found 1e-12");
}

}  // namespace
}  // namespace exitsim::sim
