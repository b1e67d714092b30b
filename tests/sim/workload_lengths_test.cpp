#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/sim/workload/lengths.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

using test_support::shared_trace;
using test_support::TempDir;

scenario::LengthConfig length(const char* dist) {
  scenario::LengthConfig c;
  c.dist = dist;
  return c;
}

std::unique_ptr<LengthDistribution> make(const scenario::LengthConfig& c, std::uint64_t seed = 1) {
  return make_length_distribution(c, "workload.input_tokens",
                                  RandomStream(seed, "workload.input_tokens"));
}

std::string error_of(const scenario::LengthConfig& c) {
  return test_support::error_of([&] { make(c); });
}

std::map<std::int64_t, int> histogram(LengthDistribution& dist, int n) {
  std::map<std::int64_t, int> counts;
  for (int i = 0; i < n; ++i)
    ++counts[dist.sample()];
  return counts;
}

TEST(LengthBounds, ClampsRoundedValuesOfAnyMagnitude) {
  const LengthBounds bounds{5, 100};
  EXPECT_EQ(bounds.clamp(0), 5);
  EXPECT_EQ(bounds.clamp(101), 100);
  EXPECT_EQ(bounds.clamp_rounded(7.5), 8);
  EXPECT_EQ(bounds.clamp_rounded(7.49), 7);
  EXPECT_EQ(bounds.clamp_rounded(1e300), 100);
  EXPECT_EQ(bounds.clamp_rounded(-1e300), 5);
  LengthBounds open;
  open.key = "workload.input_tokens";
  EXPECT_EQ(open.clamp_rounded(0.2), 1);
  EXPECT_EQ(open.clamp_rounded(2147483648.0), 2147483648);
  // Without a maximum, a draw past any request's length is refused, not clamped to int64's end
  // (input plus output wrapped around; finding D7).
  try {
    open.clamp_rounded(1e300);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "workload.input_tokens.max: expected a maximum (lengths drawn stay at most "
                 "2147483648 tokens), found none, and a draw of 1e+300 tokens");
  }
}

// min and max do not apply to a fixed length (the schema refuses them): the value is the value.
TEST(FixedLength, ReturnsItsValueUnclamped) {
  scenario::LengthConfig c = length("fixed");
  c.value = 128;
  EXPECT_EQ(make(c)->sample(), 128);
  c.max = 100;
  const auto fixed = make(c);
  EXPECT_EQ(fixed->sample(), 128);
  EXPECT_EQ(fixed->clamped(), 0);
}

TEST(LognormalLength, CountsTheDrawsItClamps) {
  scenario::LengthConfig c = length("lognormal");
  c.mean = 1000;
  c.sigma = 1.0;
  c.min = 1;
  c.max = 1000;
  const auto lengths = make(c);
  // The same stream unclamped says exactly which draws the bound moved.
  scenario::LengthConfig open = c;
  open.max = 0;
  const auto unclamped = make(open);
  std::int64_t at_max = 0;
  for (int i = 0; i < 4000; ++i) {
    lengths->sample();
    at_max += unclamped->sample() > 1000 ? 1 : 0;
  }
  EXPECT_EQ(unclamped->clamped(), 0);
  // P(X > mean) for sigma 1 is P(Z > 0.5) = 0.31; each such draw is clamped (and counted).
  EXPECT_EQ(lengths->clamped(), at_max);
  EXPECT_GT(at_max, 1100);
  EXPECT_LT(at_max, 1350);
}

TEST(UniformLength, CoversItsInclusiveBoundsEvenly) {
  scenario::LengthConfig c = length("uniform");
  c.min = 3;
  c.max = 7;
  const auto dist = make(c);
  const std::map<std::int64_t, int> counts = histogram(*dist, 50'000);
  ASSERT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 3);
  EXPECT_EQ(counts.rbegin()->first, 7);
  for (const auto& [value, count] : counts)
    EXPECT_NEAR(count, 10'000, 500) << value;
}

TEST(UniformLength, NeverGoesBelowOneToken) {
  scenario::LengthConfig c = length("uniform");
  c.min = -5;
  c.max = 2;
  const auto dist = make(c);
  const std::map<std::int64_t, int> counts = histogram(*dist, 1000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(LognormalLength, HasTheConfiguredMeanInTokens) {
  scenario::LengthConfig c = length("lognormal");
  c.mean = 500.0;
  c.sigma = 1.0;
  const auto dist = make(c);
  double sum = 0.0;
  const int n = 200'000;
  for (int i = 0; i < n; ++i)
    sum += static_cast<double>(dist->sample());
  // Relative standard error sqrt(e^(sigma^2) - 1) / sqrt(n) ~ 0.3%.
  EXPECT_NEAR(sum / n, 500.0, 500.0 * 0.02);
}

TEST(LognormalLength, WithZeroSigmaIsTheMean) {
  scenario::LengthConfig c = length("lognormal");
  c.mean = 64.0;
  const auto dist = make(c);
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(dist->sample(), 64);
}

TEST(LognormalLength, IsClampedToMinAndMax) {
  scenario::LengthConfig c = length("lognormal");
  c.mean = 100.0;
  c.sigma = 2.0;
  c.min = 10;
  c.max = 200;
  const auto dist = make(c);
  const std::map<std::int64_t, int> counts = histogram(*dist, 20'000);
  EXPECT_EQ(counts.begin()->first, 10);
  EXPECT_EQ(counts.rbegin()->first, 200);
  EXPECT_GT(counts.begin()->second, 1000);  // P(X < 10) ~ 0.44, P(X > 200) ~ 0.09
  EXPECT_GT(counts.rbegin()->second, 1000);
}

TEST(LengthDistributions, AreDeterministicPerSeed) {
  scenario::LengthConfig c = length("lognormal");
  c.mean = 300.0;
  c.sigma = 0.8;
  const auto a = make(c, 5);
  const auto b = make(c, 5);
  const auto other = make(c, 6);
  int different = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t x = a->sample();
    ASSERT_EQ(x, b->sample());
    different += x != other->sample();
  }
  EXPECT_GT(different, 900);
}

TEST(EmpiricalLength, ResamplesTheChosenColumnOfALengthTrace) {
  const TempDir dir;
  scenario::LengthConfig c = length("empirical");
  c.path = dir.write("lengths.csv",
                     "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
                     "10,1,11,10\n20,2,22,10\n30,3,33,10\n");
  c.column = "input";
  std::map<std::int64_t, int> counts = histogram(*make(c), 30'000);
  ASSERT_EQ(counts.size(), 3u);
  for (const std::int64_t value : {10, 20, 30})
    EXPECT_NEAR(counts[value], 10'000, 500) << value;

  c.column = "output";
  counts = histogram(*make(c), 300);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.begin()->first, 1);
  EXPECT_EQ(counts.rbegin()->first, 3);

  c.column = "input";
  c.max = 25;
  counts = histogram(*make(c), 300);
  EXPECT_EQ(counts.rbegin()->first, 25);
}

TEST(EmpiricalLength, ReadsTimestampedTracesToo) {
  const TempDir dir;
  scenario::LengthConfig c = length("empirical");
  c.path = dir.write("azure.csv",
                     "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,374,44\n");
  c.column = "output";
  EXPECT_EQ(make(c)->sample(), 44);
}

TEST(EmpiricalLength, MatchesThePublishedArxivTraceMean) {
  const std::string path = shared_trace("arxiv_summarization_lengths.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  scenario::LengthConfig c = length("empirical");
  c.path = path;
  c.column = "input";
  const auto dist = make(c);
  double sum = 0.0;
  const int n = 100'000;
  for (int i = 0; i < n; ++i)
    sum += static_cast<double>(dist->sample());
  double file_sum = 0.0;
  double file_count = 0.0;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    file_sum += std::stod(line.substr(0, line.find(',')));
    ++file_count;
  }
  ASSERT_GT(file_count, 0.0);
  const double mean = file_sum / file_count;
  EXPECT_NEAR(sum / n, mean, mean * 0.02);
}

TEST(MakeLengthDistribution, RejectsImpossibleConfigurations) {
  const TempDir dir;
  EXPECT_EQ(error_of(length("zipf")),
            "workload.input_tokens.dist: expected one of fixed, uniform, lognormal, empirical, "
            "found 'zipf'");
  EXPECT_EQ(error_of(length("lognormla")),
            "workload.input_tokens.dist: expected one of fixed, uniform, lognormal, empirical, "
            "found 'lognormla' (did you mean 'lognormal'?)");

  scenario::LengthConfig fixed = length("fixed");
  EXPECT_EQ(error_of(fixed), "workload.input_tokens.value: expected a length >= 1 token, found 0");
  fixed.value = 10;
  fixed.max = -1;
  EXPECT_EQ(error_of(fixed),
            "workload.input_tokens.max: expected an upper bound >= 0 (0 = none), found -1");

  scenario::LengthConfig uniform = length("uniform");
  uniform.min = 20;
  uniform.max = 10;
  EXPECT_EQ(error_of(uniform), "workload.input_tokens.min: expected a value <= max (10), found 20");
  uniform.max = 0;
  EXPECT_EQ(error_of(uniform),
            "workload.input_tokens.max: expected an upper bound >= 1 (uniform needs one), found 0");

  scenario::LengthConfig lognormal = length("lognormal");
  lognormal.mean = 0.5;
  EXPECT_EQ(error_of(lognormal),
            "workload.input_tokens.mean: expected a mean from 1 to 2147483648 tokens, found 0.5");
  lognormal.mean = 100.0;
  lognormal.sigma = -1.0;
  EXPECT_EQ(error_of(lognormal),
            "workload.input_tokens.sigma: expected a standard deviation of log(length) >= 0, "
            "found -1");

  scenario::LengthConfig empirical = length("empirical");
  empirical.column = "input";
  EXPECT_EQ(error_of(empirical),
            "workload.input_tokens.path: expected a request trace file for the empirical "
            "distribution, found an empty path");
  empirical.path = dir.write("header_only.csv", "num_prefill_tokens,num_decode_tokens\n");
  empirical.column = "total";
  EXPECT_EQ(error_of(empirical),
            "workload.input_tokens.column: expected input or output, found 'total'");
  // An empty trace is rejected by the reader itself (naming the file); the message is its own.
  empirical.column = "input";
  const std::string empty_trace = error_of(empirical);
  EXPECT_TRUE(empty_trace.starts_with(empirical.path + ": ")) << empty_trace;
  EXPECT_NE(empty_trace.find("at least one request"), std::string::npos) << empty_trace;
}

}  // namespace
}  // namespace exitsim::sim
