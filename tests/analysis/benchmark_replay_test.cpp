// `validate --against` beyond vLLM's detailed results: the figures of a summary-only result and
// the requests made up in its place, arrivals recorded by GuideLLM and AIPerf, the recognition of
// a benchmark's repeated prompts, and their replay as cached (--prefix-cache warm).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "exitsim/analysis/benchmark_validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

std::string fixture(const std::string& name) {
  return std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/" + name;
}

const NamedFigure* find(const std::vector<NamedFigure>& figures, const std::string& name) {
  for (const NamedFigure& f : figures) {
    if (f.name == name)
      return &f;
  }
  return nullptr;
}

TEST(SummaryOnlyBenchmark, ItsFiguresAreTheOnesItsSummaryCarries) {
  const traces::ServingBenchmark b =
      traces::read_serving_benchmark(fixture("vllm_summary_only.json"));
  const std::vector<NamedFigure> f = benchmark_figures(b);
  // Throughput 2, then mean, median and p99 of TTFT, TPOT, ITL and E2E (no p90 in the file).
  ASSERT_EQ(f.size(), 14u);
  EXPECT_EQ(f[0].name, "throughput_tokens_per_s");
  EXPECT_DOUBLE_EQ(f[0].value, 230.8);  // output_throughput
  EXPECT_DOUBLE_EQ(find(f, "ttft_p50_ms")->value, 58.0);
  EXPECT_TRUE(find(f, "ttft_p50_ms")->judged);
  EXPECT_DOUBLE_EQ(find(f, "e2e_p99_ms")->value, 1330.0);  // p99_e2el_ms
  EXPECT_FALSE(find(f, "e2e_p99_ms")->judged);
  EXPECT_EQ(find(f, "ttft_p90_ms"), nullptr);
  EXPECT_TRUE(summary_cross_checks(b).empty());  // nothing to cross-check a summary with
  // AIPerf's names: its inter_token_latency is exitsim's TPOT, inter_chunk_latency the ITL.
  const traces::ServingBenchmark a =
      traces::read_serving_benchmark(fixture("aiperf_profile_export_aiperf.json"));
  const std::vector<NamedFigure> g = benchmark_figures(a);
  EXPECT_DOUBLE_EQ(find(g, "tpot_p50_ms")->value, 8.4);
  EXPECT_DOUBLE_EQ(find(g, "e2e_p90_ms")->value, 1200.0);  // request_latency.p90
  EXPECT_DOUBLE_EQ(find(g, "throughput_requests_per_s")->value, 1.9);
  EXPECT_EQ(find(g, "itl_p50_ms"), nullptr);  // no inter_chunk_latency in the fixture
}

TEST(SummaryOnlyBenchmark, RequestsAreMadeAtTheMeansAndTheLastOnesFail) {
  const traces::ServingBenchmark b =
      traces::read_serving_benchmark(fixture("vllm_summary_only.json"));
  const auto [replayed, said] = with_reconstructed_requests(b, nullptr);
  // 50 sent, 48 completed: 24,600 / 48 = 512.5 -> 513 prompt tokens, 6,000 / 48 = 125 out.
  ASSERT_EQ(replayed.requests.size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(replayed.requests[i].input_tokens, 513) << i;
    EXPECT_EQ(replayed.requests[i].output_tokens, 125) << i;
    EXPECT_EQ(replayed.requests[i].failed, i >= 48) << i;
  }
  EXPECT_NE(said.find("every prompt fixed at the file's mean, 513 tokens (total_input_tokens / "
                      "48 completed)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("2 of 50 requests failed in the benchmark: the last 2 are not replayed"),
            std::string::npos)
      << said;
  // vLLM's arrivals over all 50 sent, as benchmark_arrivals draws them for a detailed result.
  EXPECT_EQ(benchmark_arrivals(replayed, 3).size(), 50u);
}

TEST(SummaryOnlyBenchmark, WithoutTotalsTheLengthsComeFromTheWorkloadInOrder) {
  traces::ServingBenchmark b = traces::read_serving_benchmark(fixture("vllm_summary_only.json"));
  b.summary_only->mean_input_tokens.reset();
  b.summary_only->mean_output_tokens.reset();
  const scenario::Scenario s = scenario::load_default_scenario();
  const auto workload = sim::make_workload(s.workload, s.seed);
  const auto [replayed, said] = with_reconstructed_requests(b, workload.get());
  // The same workload, drawn again: its first 50 requests' lengths, in order.
  const auto again = sim::make_workload(s.workload, s.seed);
  for (std::size_t i = 0; i < 50; ++i) {
    const RequestDescriptor d = *again->next();
    EXPECT_EQ(replayed.requests[i].input_tokens, d.input_tokens) << i;
    EXPECT_EQ(replayed.requests[i].output_tokens, d.output_tokens) << i;
  }
  EXPECT_NE(said.find("prompt and output lengths drawn from the scenario's workload section"),
            std::string::npos)
      << said;
  // No workload to draw from and no totals: refused naming the missing key.
  EXPECT_EQ(test_support::error_of([&] {
              with_reconstructed_requests(b, nullptr);
            }).rfind(b.path + ": total_input_tokens: expected the token totals", 0),
            0u);
}

TEST(RecordedArrivals, AreTheSendTimesWhateverTheSeed) {
  const traces::ServingBenchmark b =
      traces::read_serving_benchmark(fixture("guidellm_report.json"));
  // Sent 0, 250, 500, 750 and 1000 ms after the first (the fixture's 2000.0 .. 2001.0 s).
  const std::vector<TimeNs> expected{0, 250'000'000, 500'000'000, 750'000'000, 1'000'000'000};
  EXPECT_EQ(benchmark_arrivals(b, 1), expected);
  EXPECT_EQ(benchmark_arrivals(b, 99), expected);
  // GuideLLM's figures: TPOT from each request's mean gap, no ITL (no gaps recorded).
  const std::vector<NamedFigure> f = benchmark_figures(b);
  EXPECT_EQ(find(f, "itl_p50_ms"), nullptr);
  // Three successful: TPOTs 30, 15 and 12.5 ms (mean gaps); the median by nearest rank is 15.
  EXPECT_DOUBLE_EQ(find(f, "tpot_p50_ms")->value, 15.0);
  // E2E = TTFT + gap x (output - 1): 60 + 30, 80 + 30, 130 + 62.5.
  EXPECT_DOUBLE_EQ(find(f, "e2e_mean_ms")->value, (90.0 + 110.0 + 192.5) / 3);
  // 11 output tokens over 1.5 s.
  EXPECT_DOUBLE_EQ(find(f, "throughput_tokens_per_s")->value, 11 / 1.5);
}

TEST(ReconstructedArrivals, AiperfConstantModeIsEvenGapsFromZero) {
  traces::ServingBenchmark b =
      traces::read_serving_benchmark(fixture("aiperf_profile_export_aiperf.json"));
  b.burstiness = std::numeric_limits<double>::infinity();  // request_rate_mode constant
  const auto [replayed, said] = with_reconstructed_requests(b, nullptr);
  const std::vector<TimeNs> arrivals = benchmark_arrivals(replayed, 5);
  ASSERT_EQ(arrivals.size(), 102u);
  for (std::size_t i = 0; i < arrivals.size(); ++i)
    EXPECT_NEAR(static_cast<double>(arrivals[i]), static_cast<double>(i) * 0.5e9, 2.0) << i;
}

traces::ServingBenchmark with_lengths(const std::vector<std::int64_t>& lengths) {
  traces::ServingBenchmark b;
  for (const std::int64_t n : lengths)
    b.requests.push_back({n, 10, 1'000'000, {}, 0, std::nullopt, false, ""});
  return b;
}

TEST(PromptRepetition, APeriodOfInputLengthsIsTakenAsACycledPromptList) {
  // Three prompts cycled over eight requests: 100 200 150 | 100 200 150 | 100 200.
  const PromptRepetition r =
      recognise_prompt_repetition(with_lengths({100, 200, 150, 100, 200, 150, 100, 200}));
  EXPECT_EQ(r.period, 3);
  EXPECT_EQ(r.repeats, 5);
  EXPECT_EQ(r.first_sent, (std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0, 1}));
  EXPECT_NE(r.description.find("requests 4-8 taken as repeats of requests 1-3"), std::string::npos)
      << r.description;
  // A list whose start comes back once, later: period 5, the last two repeat the first two.
  EXPECT_EQ(recognise_prompt_repetition(with_lengths({7, 9, 8, 6, 5, 7, 9})).period, 5);
}

TEST(PromptRepetition, NothingIsRecognisedWithoutAPeriodOrFromEqualLengths) {
  const PromptRepetition none = recognise_prompt_repetition(with_lengths({100, 200, 150, 120}));
  EXPECT_EQ(none.period, 0);
  EXPECT_EQ(none.repeats, 0);
  EXPECT_EQ(none.first_sent, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_NE(none.description.find("none recognised"), std::string::npos);
  // A fixed-length random dataset: every prompt 512 tokens, all different; lengths cannot tell.
  const PromptRepetition same = recognise_prompt_repetition(with_lengths({512, 512, 512, 512}));
  EXPECT_EQ(same.period, 0);
  EXPECT_NE(same.description.find("every prompt has 512 tokens"), std::string::npos);
}

// The finding's case (benchmark_validation_test.cpp): 42.7k prompt tokens answered in 452 ms by
// Llama-3.1-70B on 8 A100s, whose prefill needs at least 2.41 s. Here two prompts (42,700 and
// 40,000 tokens) are cycled five times, one every 20 s (longer than a simulated prefill, so
// that no queue forms): the first two measured at 5 s (computed), the eight repeats at 452 ms
// (cached). Replayed computed, every TTFT is a full prefill; replayed warm, the repeats find
// their prompt's blocks cached and the TTFT falls below the measured 452 ms.
TEST(PrefixCacheWarm, RepeatedPromptsReplayCachedAndTheirTtftDropsTowardTheMeasured) {
  traces::ServingBenchmark b;
  b.path = "r.json";
  b.request_rate = 0.05;
  b.burstiness = std::numeric_limits<double>::infinity();  // even gaps of 20 s
  b.duration_s = 200;
  for (int i = 0; i < 10; ++i) {
    const TimeNs ttft = i < 2 ? 5'000'000'000 : 452'000'000;
    b.requests.push_back({i % 2 == 0 ? 42'700 : 40'000, 10, ttft, {}, 0, std::nullopt, false, ""});
  }
  const std::vector<std::string> overrides{
      "model.preset=llama-3.1-70b", "hardware.preset=a100-80gb", "parallel.tensor=8",
      "scheduler.max_batched_tokens=65536", "scheduler.prefix_caching=true"};
  const scenario::Scenario s = scenario::load_default_scenario(overrides);
  const std::vector<TimeNs> arrivals = benchmark_arrivals(b, 1);
  const PromptRepetition repetition = recognise_prompt_repetition(b);
  ASSERT_EQ(repetition.period, 2);
  ASSERT_EQ(repetition.repeats, 8);
  const sim::MetricsSummary cold = simulate_benchmark(s, b, arrivals);
  const sim::MetricsSummary warm = simulate_benchmark(s, b, arrivals, &repetition);
  const double measured_p50 = find(benchmark_figures(b), "ttft_p50_ms")->value;
  ASSERT_DOUBLE_EQ(measured_p50, 452.0);   // the 5th of 10 sorted: eight 452s, two 5000s
  EXPECT_GT(cold.ttft.p50, 2'410.0);       // every prompt computed: above the compute floor
  EXPECT_LT(warm.ttft.p50, measured_p50);  // the repeats' cached prefix is not computed
  EXPECT_LT(std::abs(warm.ttft.p50 - measured_p50), std::abs(cold.ttft.p50 - measured_p50));
  // The repeats' whole 16-token blocks up to (not including) their last token were read from
  // the cache: 42,699 tokens -> 2,668 blocks = 42,688 tokens, 39,999 -> 2,499 blocks = 39,984;
  // four repeats of each.
  ASSERT_TRUE(warm.prefix_cache.has_value());
  EXPECT_EQ(warm.prefix_cache->hit_tokens, 4 * 42'688 + 4 * 39'984);
  EXPECT_FALSE(cold.prefix_cache && cold.prefix_cache->hit_tokens > 0);
  // The evidence line says what to try, or, warm, what the replay did.
  const ModelShape& model = s.model.shape;
  const auto hint =
      warm_prefix_cache_evidence(b, model, s.hardware.spec, 8, PromptReplay::computed);
  ASSERT_EQ(hint.size(), 1u);
  EXPECT_NE(hint[0].find("try --prefix-cache warm"), std::string::npos) << hint[0];
  const auto done = warm_prefix_cache_evidence(b, model, s.hardware.spec, 8, PromptReplay::warm);
  EXPECT_EQ(done[0].find("try --prefix-cache warm"), std::string::npos) << done[0];
}

}  // namespace
}  // namespace exitsim::analysis
