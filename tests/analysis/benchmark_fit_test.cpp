// calibrate --against's fit (analysis::fit_benchmark_runs) against an oracle: vLLM results made
// by simulating Llama-2-7B on an H100 with known settings at 3, 6 and 9 req/s (600 requests each,
// every token's time from the simulator's steps), fitted from the preset's values with the
// highest rate held out.
//
// The arrivals are evenly spaced (burstiness inf): the fit then replays exactly the send times
// the oracle had, so what separates it from the truth is the fit alone, not an arrival draw. The
// resolution it can reach is the simulator's: it reports percentiles from a latency sketch of
// 1%-wide buckets, so a p50 moves in steps of about 1%.

#include "exitsim/analysis/benchmark_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "support/benchmark_results.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::TempDir;

constexpr const char* k_scenario =
    "model: {preset: llama-2-7b}\nhardware: {preset: h100-sxm}\nseed: 42\n";
constexpr double k_even_gaps = std::numeric_limits<double>::infinity();

// The fit of the preset to runs of a deployment that prices as the preset with `truth`.
struct OracleFit {
  scenario::Scenario base, truth;
  std::vector<traces::ServingBenchmark> runs;  // as read from the files
  BenchmarkFit fit;
  std::string report;  // for failure messages
};

OracleFit fit_to_oracle(const TempDir& dir, const std::vector<std::string>& truth,
                        const BenchmarkFitOptions& options = {},
                        const std::vector<double>& rates = {3.0, 6.0, 9.0}) {
  OracleFit o{scenario::load_scenario_text(k_scenario, "base"),
              scenario::load_scenario_text(k_scenario, "truth", truth),
              {},
              {},
              {}};
  const std::vector<test_support::RequestLengths> lengths = test_support::request_lengths(600, 7);
  std::vector<std::string> files;
  for (const double rate : rates) {
    files.push_back(
        dir.write(fmt::format("rate{}.json", rate),
                  test_support::simulated_vllm_result(o.truth, lengths, rate, k_even_gaps, 1000)));
  }
  o.runs = read_benchmark_runs(files);
  o.fit = fit_benchmark_runs(o.base, o.runs, options);
  o.report = fmt::format("{}", fmt::join(benchmark_fit_report(o.fit), "\n"));
  return o;
}

const FittedValue* fitted(const BenchmarkFit& fit, const std::string& key) {
  for (const FittedValue& v : fit.values) {
    if (v.key == key)
      return &v;
  }
  return nullptr;
}

bool said_not_fitted(const BenchmarkFit& fit, const std::string& key, const std::string& why) {
  for (const std::string& line : fit.not_fitted) {
    if (line.starts_with(key + ": ") && line.find(why) != std::string::npos)
      return true;
  }
  return false;
}

const FitRun& held_out_run(const BenchmarkFit& fit) {
  for (const FitRun& run : fit.runs) {
    if (run.held_out)
      return run;
  }
  throw std::logic_error("no held-out run");
}

// A deployment whose GEMMs reach 0.55 of peak FLOP/s and 0.70 of the bandwidth, not the preset's
// 0.7 and 0.85: both are recovered, nothing else is moved, and the held-out 9 req/s run, which
// the preset misses by 19-34%, is predicted within 3%.
//
// Tolerances from the measured sensitivity (validate --against on these files): 0.03 of flops
// efficiency moves the TTFT p50s by about 3% (0.52 / 0.55 / 0.58: 39.2 / 38.1 / 37.0 ms at
// 3 req/s), 0.014 of bandwidth efficiency the ITL p50s by about 2% (11.70 / 11.47 / 11.13 ms at
// 6 req/s): a value within those is within two or three of the figures' 1% steps of the truth.
TEST(BenchmarkFit, RecoversKnownEfficienciesAndPredictsTheHeldOutRate) {
  TempDir dir;
  const OracleFit o = fit_to_oracle(
      dir, {"cost_model.flops_efficiency=0.55", "cost_model.bandwidth_efficiency=0.7"});
  const FittedValue* flops = fitted(o.fit, "cost_model.flops_efficiency");
  const FittedValue* bandwidth = fitted(o.fit, "cost_model.bandwidth_efficiency");
  ASSERT_NE(flops, nullptr) << o.report;
  ASSERT_NE(bandwidth, nullptr) << o.report;
  EXPECT_NEAR(flops->after, 0.55, 0.03) << o.report;
  EXPECT_NEAR(bandwidth->after, 0.70, 0.015) << o.report;
  EXPECT_EQ(o.fit.values.size(), 2U) << o.report;  // the truth differs in these two only
  const FitRun& held = held_out_run(o.fit);
  EXPECT_EQ(held.request_rate, 9.0);
  ASSERT_EQ(held.figures.size(), 5U) << o.report;
  for (const FitFigure& f : held.figures) {
    EXPECT_LT(std::abs(f.after / f.measured - 1), 0.03) << f.name << "\n" << o.report;
    if (f.name != "throughput_tokens_per_s") {  // the offered load sets it either way
      EXPECT_GT(std::abs(f.before / f.measured - 1), 0.15) << f.name << "\n" << o.report;
    }
  }
  // The collective and pipeline terms price nothing on one GPU: not fitted, and said why.
  EXPECT_TRUE(said_not_fitted(o.fit, "hardware.link_latency_us", "parallel.tensor 1")) << o.report;
  EXPECT_TRUE(said_not_fitted(o.fit, "hardware.send_latency_us", "parallel.pipeline 1"))
      << o.report;
}

// The decode step's time at `batch` sequences of 1000 tokens' context, as `s` prices it.
double decode_step_us(const scenario::Scenario& s, std::int64_t batch) {
  const auto model = sim::make_cost_model(s.cost_model, s.model.shape, s.hardware.spec);
  std::vector<sim::BatchEntry> entries(static_cast<std::size_t>(batch));
  for (sim::BatchEntry& e : entries) {
    e.query_tokens = 1;
    e.context_tokens = 1000;
    e.depth = s.model.shape.depth.stacked_depth();
    e.emits_token = true;
  }
  return static_cast<double>(model->iteration_cost(entries).total) / 1e3;
}

// Every kernel's minimum time 6 us and decode attention's floor 25 us (the preset: 3.6 and 16.6)
// both add a fixed time to each decode step, as do the weight reads the bandwidth efficiency
// prices and the launch overhead: on the p50s of two rates they are one direction, so the fit
// moves one of them (the one it prefers: the bandwidth efficiency, fit_knobs' order) and says
// that it kept the others. What the runs do determine, the decode step's time at the batches
// they ran, is recovered: at 8 sequences of 1000 tokens the preset prices a step at 8.65 ms
// against the truth's 9.46 (-8.6%), the fit within 2% (9.46). (Beyond the batches seen the
// stand-in shows: at 32 sequences the fit prices 15.04 ms against 14.41, as the bandwidth
// efficiency also slows the K/V reads; hence the held-out TPOT's +5%.)
TEST(BenchmarkFit, SaysWhatTheRunsCannotTellApartAndFitsTheStepTimeTheyDetermine) {
  TempDir dir;
  const OracleFit o =
      fit_to_oracle(dir, {"hardware.min_kernel_us=6", "hardware.decode_attention_floor_us=25"});
  EXPECT_TRUE(said_not_fitted(o.fit, "hardware.decode_attention_floor_us", "")) << o.report;
  EXPECT_TRUE(said_not_fitted(o.fit, "hardware.min_kernel_us", "")) << o.report;
  const double truth = decode_step_us(o.truth, 8);
  EXPECT_GT(std::abs(decode_step_us(o.base, 8) / truth - 1), 0.07) << o.report;
  EXPECT_LT(std::abs(decode_step_us(o.fit.fitted, 8) / truth - 1), 0.02) << o.report;
  EXPECT_LT(o.fit.loss_after, o.fit.loss_before / 20) << o.report;
}

// --search-requests: the search simulates the first 200 of each run's 600 requests and compares
// their own p50s (no throughput: part of a run has no measured duration), which the notes say;
// the comparisons before and after still use every request: their measured figures are the
// whole run's. Four rates: three fitting runs' twelve p50s, as many parameters move them.
TEST(BenchmarkFit, ACappedSearchSaysSoAndComparesWholeRuns) {
  TempDir dir;
  BenchmarkFitOptions options;
  options.search_requests = 200;
  const std::vector<double> rates = {3.0, 5.0, 7.0, 9.0};
  const OracleFit o = fit_to_oracle(dir, {"cost_model.bandwidth_efficiency=0.7"}, options, rates);
  std::size_t capped = 0;
  for (const std::string& note : o.fit.notes)
    capped += note.find("the search simulated its first 200 of 600 requests") != std::string::npos;
  EXPECT_EQ(capped, 3U) << o.report;  // the fitting runs; the held-out one is not searched
  EXPECT_EQ(o.fit.fitted_figures, 12) << o.report;  // three runs' four p50s
  ASSERT_EQ(o.fit.runs.size(), o.runs.size());
  for (std::size_t r = 0; r < o.runs.size(); ++r) {
    ASSERT_EQ(o.fit.runs[r].figures.size(), 5U) << o.report;
    for (const NamedFigure& whole : benchmark_figures(o.runs[r])) {
      for (const FitFigure& f : o.fit.runs[r].figures) {
        if (f.name == whole.name) {
          EXPECT_EQ(f.measured, whole.value) << f.name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace exitsim::analysis
