// `exitsim validate SCENARIO --against FILE` on every kind of result it reads: summary-only vLLM
// and SGLang results, a GuideLLM report and AIPerf's exports (the fixtures of
// tests/traces/serving_benchmark/), the real files of ../shared/benchmarks when present, --run
// and --prefix-cache; each console states what was reconstructed and what was recorded, and
// validation.json carries it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_scenario = "scenarios/default.yaml";

std::string fixture(const std::string& name) {
  return std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/" + name;
}

class ValidateAgainstKinds : public Cli {
 protected:
  Result validate(const std::string& file, const std::string& extra = "") {
    return run(std::string("validate ") + k_scenario + " --against '" + file + "' -o '" +
               (dir_ / "out").string() + "' --arrival-seeds 2 " + extra);
  }
  json against() const { return json::parse(slurp(dir_ / "out" / "validation.json"))["against"]; }
  std::map<std::string, json> metrics() const {
    std::map<std::string, json> m;
    const json v = json::parse(slurp(dir_ / "out" / "validation.json"));
    for (const json& metric : v["strategies"][0]["metrics"])
      m[metric["metric"].get<std::string>()] = metric;
    return m;
  }
};

TEST_F(ValidateAgainstKinds, ASummaryOnlyVllmResultIsComparedOnItsFigures) {
  const Result r = validate(fixture("vllm_summary_only.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(vllm vllm, summary only: 48 requests reconstructed, 14 figures "
                       "compared)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("not matched arrivals: not in the file (summary only: 50 requests sent): "
                       "gamma gaps of shape 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("not matched lengths: not in the file (summary only): every prompt fixed "
                       "at the file's mean, 513 tokens"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("not matched figures: the file's summary only"), std::string::npos);
  const auto m = metrics();
  EXPECT_EQ(m.size(), 14u);  // only the figures the file carries
  EXPECT_FALSE(m.contains("ttft_p90_ms"));
  EXPECT_DOUBLE_EQ(m.at("ttft_p50_ms")["benchmark"].get<double>(), 58.0);
  const json a = against();
  EXPECT_EQ(a["summary_only"], true);
  EXPECT_EQ(a["requests_in_file"], 50);
  EXPECT_EQ(a["excluded_failed"], 2);
  EXPECT_NE(a["lengths"].get<std::string>().find("513 tokens"), std::string::npos);
  // Repetition cannot be recognised without per-request lengths.
  const Result warm = validate(fixture("vllm_summary_only.json"), "--prefix-cache warm");
  EXPECT_NE(warm.exit_code, 0);
  EXPECT_EQ(warm.err,
            "exitsim: error: --prefix-cache: expected a result with per-request input "
            "lengths (repetition is recognised from them), found " +
                fixture("vllm_summary_only.json") + ", summary only\n");
}

TEST_F(ValidateAgainstKinds, SglangJsonLinesTakeTheLastRunUnlessOneIsNamed) {
  const Result last = validate(fixture("sglang_summary_only.jsonl"));
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_NE(last.out.find("the file holds 2 runs (JSON Lines): run 2, line 2 is compared, the "
                          "last, by default; --run K picks another"),
            std::string::npos)
      << last.out;
  EXPECT_DOUBLE_EQ(metrics().at("ttft_p50_ms")["benchmark"].get<double>(), 150.0);
  const Result first = validate(fixture("sglang_summary_only.jsonl"), "--run 1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_DOUBLE_EQ(metrics().at("ttft_p50_ms")["benchmark"].get<double>(), 120.0);
  EXPECT_EQ(against()["run"], 1);
  const Result third = validate(fixture("sglang_summary_only.jsonl"), "--run 3");
  EXPECT_NE(third.exit_code, 0);
  EXPECT_EQ(third.err, "exitsim: error: --run: expected a run of " +
                           fixture("sglang_summary_only.jsonl") + ": 1 to 2, found 3\n");
  const Result alone = run(std::string("validate ") + k_scenario + " --run 1");
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.err.find("--run: expected --against"), std::string::npos) << alone.err;
}

TEST_F(ValidateAgainstKinds, AGuidellmRunReplaysItsRecordedSendTimes) {
  const Result r = validate(fixture("guidellm_report.json"), "--run 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(guidellm openai_http, run 1 of 2, 3 of 3 requests compared)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("simulated: one run, at the arrivals said below"), std::string::npos);
  EXPECT_NE(r.out.find("not matched arrivals: recorded in the file (GuideLLM's "
                       "request_start_time): each request replayed at its send time, no "
                       "reconstruction needed"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run 1 (synchronous) is compared; --run K picks another"),
            std::string::npos);
  EXPECT_NE(r.out.find("not matched figures: no ITL"), std::string::npos);
  EXPECT_NE(r.out.find("synchronous strategy kept at most 1 request(s) in flight"),
            std::string::npos);
  const auto m = metrics();
  EXPECT_FALSE(m.contains("itl_p50_ms"));
  EXPECT_EQ(m.at("ttft_p50_ms")["simulated_seeds"], 1);  // recorded: one run, no seeds
  EXPECT_DOUBLE_EQ(m.at("ttft_p50_ms")["benchmark"].get<double>(), 60.0);
  const json a = against();
  EXPECT_EQ(a["format"], "guidellm");
  EXPECT_EQ(a["run_name"], "synchronous");
  EXPECT_EQ(a["request_rate"], "recorded");
}

TEST_F(ValidateAgainstKinds, AiperfRecordsAndSummaryAreRead) {
  const Result records = validate(fixture("aiperf_profile_export.jsonl"));
  ASSERT_EQ(records.exit_code, 0) << records.err;
  EXPECT_NE(records.out.find("(aiperf, 2 of 3 requests compared)"), std::string::npos)
      << records.out;
  EXPECT_NE(records.out.find("recorded in the file (AIPerf's request_start_ns)"),
            std::string::npos);
  EXPECT_NE(records.out.find("1 warm-up record(s) of AIPerf left out"), std::string::npos);
  EXPECT_TRUE(metrics().contains("itl_p50_ms"));  // its inter-chunk gaps are recorded
  const Result summary = validate(fixture("aiperf_profile_export_aiperf.json"));
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("Poisson at 2 req/s (AIPerf's exponential gaps)"), std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("every output fixed at the file's mean, 100 tokens "
                             "(output_sequence_length.avg)"),
            std::string::npos)
      << summary.out;
}

// The finding's case, through the CLI: two prompts of Llama-3.1-70B on 8 A100s cycled five times,
// the eight repeats answered in 452 ms where a prefill needs 2.41 s
// (analysis/benchmark_replay_test.cpp works the figures).
TEST_F(ValidateAgainstKinds, PrefixCacheWarmReplaysTheRepeatsAsCached) {
  json b = {{"backend", "vllm"},          {"model_id", "meta-llama/Llama-3.1-70B"},
            {"request_rate", 0.05},       {"burstiness", "inf"},
            {"max_concurrency", nullptr}, {"duration", 200.0}};
  for (int i = 0; i < 10; ++i) {
    b["input_lens"].push_back(i % 2 == 0 ? 42'700 : 40'000);
    b["output_lens"].push_back(10);
    b["ttfts"].push_back(i < 2 ? 5.0 : 0.452);
    b["itls"].push_back(json::array({0.02, 0.02}));
  }
  const fs::path result = file("cycled.json", b.dump());
  const std::string sets =
      " --set model.preset=llama-3.1-70b --set hardware.preset=a100-80gb --set parallel.tensor=8 "
      "--set scheduler.max_batched_tokens=65536";
  const Result cold = validate(result.string(), sets);
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  EXPECT_NE(cold.out.find("prefix cache: 8 of 10 requests' first tokens came sooner"),
            std::string::npos)
      << cold.out;
  EXPECT_NE(cold.out.find("try --prefix-cache warm"), std::string::npos);
  const double cold_p50 = metrics().at("ttft_p50_ms")["simulated"].get<double>();
  const Result warm = validate(result.string(), sets + " --prefix-cache warm");
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_NE(warm.out.find("not matched prompt repetition: the 10 requests' input lengths repeat "
                          "with period 2: requests 3-10 taken as repeats of requests 1-2"),
            std::string::npos)
      << warm.out;
  EXPECT_EQ(warm.out.find("try --prefix-cache warm"), std::string::npos);
  EXPECT_NE(warm.out.find("the replay's prefix cache served"), std::string::npos);
  const double warm_p50 = metrics().at("ttft_p50_ms")["simulated"].get<double>();
  EXPECT_GT(cold_p50, 2'410.0);  // computed in full: above the compute floor
  EXPECT_LT(warm_p50, 452.0);    // the repeats' cached blocks are not computed
  EXPECT_EQ(against()["prefix_cache"], "warm");
}

// ../shared/benchmarks (README.md there names the sources).
std::string shared(const std::string& name) {
  return std::string(EXITSIM_SHARED_BENCHMARKS_DIR) + "/" + name;
}

TEST_F(ValidateAgainstKinds, TheRealVllmNightlyAndGuidellmFilesAreCompared) {
  const std::string nightly = shared("vllm_nightly_llama8b_tp1_sharegpt_qps4.json");
  const std::string guidellm = shared("guidellm_llama2_7b_tp1_h100.json");
  if (!fs::exists(nightly) || !fs::exists(guidellm))
    GTEST_SKIP() << "../shared/benchmarks is absent";
  const Result n = validate(nightly);
  ASSERT_EQ(n.exit_code, 0) << n.err;
  // No token totals in the nightly format: the scenario's workload gives the lengths, said.
  EXPECT_NE(n.out.find("summary only: 200 requests reconstructed, 9 figures compared"),
            std::string::npos)
      << n.out;
  EXPECT_NE(n.out.find("prompt and output lengths drawn from the scenario's workload section"),
            std::string::npos);
  const Result g = validate(guidellm, "--set model.preset=llama-2-7b");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("run 5 of 5, 38 of 40 requests compared"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("run 5 (constant at 3.842 req/s) is compared, the last, by default"),
            std::string::npos);
}

}  // namespace
