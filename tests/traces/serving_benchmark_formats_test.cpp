// The serving-benchmark results beside vLLM's and SGLang's detailed ones
// (exitsim/traces/serving_benchmark.hpp): summary-only vLLM and SGLang results, GuideLLM reports
// and AIPerf's exports, from the hand-made fixtures under tests/traces/serving_benchmark/ (their
// sources in its README.md) read exactly, the real files of ../shared/benchmarks when present,
// and a break matrix per format where every break is one line naming the file and the key path.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/serving_benchmark.hpp"
#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;
using test_support::error_of;
using test_support::TempDir;

std::string fixture(const std::string& name) {
  return std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/" + name;
}

constexpr TimeNs k_ms = 1'000'000;

TEST(ServingBenchmarkSummaryOnly, VllmWithoutSaveDetailedIsReadAsItsCountsAndFigures) {
  const ServingBenchmark b = read_serving_benchmark(fixture("vllm_summary_only.json"));
  EXPECT_EQ(b.format, ServingBenchmarkFormat::vllm);
  ASSERT_TRUE(b.summary_only.has_value());
  EXPECT_TRUE(b.requests.empty());
  EXPECT_EQ(b.summary_only->sent, 50);       // num_prompts
  EXPECT_EQ(b.summary_only->completed, 48);  // completed
  // total_input_tokens 24,600 and total_output_tokens 6,000 over the 48 completed.
  EXPECT_DOUBLE_EQ(*b.summary_only->mean_input_tokens, 512.5);
  EXPECT_DOUBLE_EQ(*b.summary_only->mean_output_tokens, 125.0);
  EXPECT_EQ(b.summary_only->mean_input_from, "total_input_tokens / 48 completed");
  EXPECT_DOUBLE_EQ(*b.request_rate, 2.0);
  EXPECT_DOUBLE_EQ(b.duration_s, 26.0);
  EXPECT_DOUBLE_EQ(b.summary.at("median_ttft_ms"), 58.0);
  EXPECT_DOUBLE_EQ(b.summary.at("p99_e2el_ms"), 1330.0);
  EXPECT_FALSE(b.arrivals_recorded());
}

TEST(ServingBenchmarkSummaryOnly, SglangWithoutOutputDetailsGivesOneRunPerLine) {
  const std::vector<ServingBenchmark> runs =
      read_serving_benchmark_runs(fixture("sglang_summary_only.jsonl"));
  ASSERT_EQ(runs.size(), 2u);
  const ServingBenchmark& b = runs[1];
  EXPECT_EQ(b.format, ServingBenchmarkFormat::sglang);
  EXPECT_EQ(b.line, 2);
  EXPECT_EQ(b.run, 2);
  EXPECT_EQ(b.runs, 2);
  ASSERT_TRUE(b.summary_only.has_value());
  EXPECT_EQ(b.summary_only->sent, 40);  // no num_prompts: completed stands for it
  EXPECT_EQ(b.summary_only->completed, 40);
  EXPECT_DOUBLE_EQ(*b.summary_only->mean_input_tokens, 40960.0 / 40);
  EXPECT_EQ(b.summary_only->dataset, "random");
  EXPECT_DOUBLE_EQ(*b.request_rate, 4.0);
  EXPECT_DOUBLE_EQ(runs[0].summary.at("median_ttft_ms"), 120.0);
  EXPECT_DOUBLE_EQ(b.summary.at("median_ttft_ms"), 150.0);
}

TEST(ServingBenchmarkGuidellm, EveryBenchmarkIsARunInSendOrderWithItsRecordedTimes) {
  const std::vector<ServingBenchmark> runs =
      read_serving_benchmark_runs(fixture("guidellm_report.json"));
  ASSERT_EQ(runs.size(), 2u);
  const ServingBenchmark& sync = runs[0];
  EXPECT_EQ(sync.format, ServingBenchmarkFormat::guidellm);
  EXPECT_EQ(sync.run, 1);
  EXPECT_EQ(sync.runs, 2);
  EXPECT_EQ(sync.run_name, "synchronous");
  EXPECT_EQ(sync.backend, "openai_http");
  EXPECT_EQ(sync.model_id, "meta-llama/Llama-2-7b-hf");
  EXPECT_FALSE(sync.gaps_recorded);
  EXPECT_TRUE(sync.arrivals_recorded());
  EXPECT_DOUBLE_EQ(sync.duration_s, 2.0);
  ASSERT_EQ(sync.requests.size(), 3u);
  // Sent at 1000.0, 1000.5 and 1001.0 s; decode = inter_token_latency_ms x (output - 1).
  const BenchmarkRequest& a = sync.requests[0];
  EXPECT_EQ(a.sent, 0);
  EXPECT_EQ(a.input_tokens, 100);
  EXPECT_EQ(a.output_tokens, 5);
  EXPECT_EQ(a.ttft, 50 * k_ms);
  EXPECT_EQ(a.decode, 4 * 10 * k_ms);
  EXPECT_TRUE(a.itls.empty());
  EXPECT_EQ(sync.requests[1].sent, 500 * k_ms);
  EXPECT_EQ(sync.requests[1].decode, 0);  // one output token: no gap (inter_token_latency null)
  EXPECT_EQ(sync.requests[2].decode, 3 * 20 * k_ms);
  // A closed loop of one request in flight, replayed at its send times: said.
  ASSERT_EQ(sync.notes.size(), 1u);
  EXPECT_NE(sync.notes[0].find("synchronous strategy kept at most 1 request(s) in flight"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(sync.summary.at("time_to_first_token_ms.mean"), 60.0);

  // The constant-rate run: its lists merged and sorted by send time (2000.0, .25, .5, .75, 2001).
  const ServingBenchmark& rate = runs[1];
  EXPECT_EQ(rate.run_name, "constant at 4 req/s");
  EXPECT_DOUBLE_EQ(*rate.request_rate, 4.0);
  ASSERT_EQ(rate.requests.size(), 5u);
  const std::int64_t inputs[] = {110, 5000, 120, 130, 140};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rate.requests[i].sent, static_cast<TimeNs>(i) * 250 * k_ms) << i;
    EXPECT_EQ(rate.requests[i].input_tokens, inputs[i]) << i;
  }
  EXPECT_TRUE(rate.requests[1].failed);
  EXPECT_EQ(rate.requests[1].failure, "error: Client error '400 Bad Request'");
  EXPECT_TRUE(rate.requests[4].failed);
  EXPECT_EQ(rate.requests[4].failure, "incomplete (cut off when the run ended)");
  EXPECT_EQ(rate.requests[3].decode, 5 * 12'500'000);  // 12.5 ms x 5 gaps
  EXPECT_EQ(rate.failed_requests(), 2);
  EXPECT_TRUE(rate.notes.empty());  // an open loop
  // read_serving_benchmark gives the last run.
  EXPECT_EQ(read_serving_benchmark(fixture("guidellm_report.json")).run, 2);
}

TEST(ServingBenchmarkAiperf, RecordsAreOneRunInSendOrderWithoutTheWarmUp) {
  const ServingBenchmark b = read_serving_benchmark(fixture("aiperf_profile_export.jsonl"));
  EXPECT_EQ(b.format, ServingBenchmarkFormat::aiperf);
  EXPECT_EQ(b.runs, 1);
  EXPECT_TRUE(b.gaps_recorded);
  EXPECT_TRUE(b.arrivals_recorded());
  ASSERT_EQ(b.requests.size(), 3u);  // the warm-up record left out, said
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("1 warm-up record(s)"), std::string::npos);
  const BenchmarkRequest& a = b.requests[0];
  EXPECT_EQ(a.sent, 0);
  EXPECT_EQ(a.input_tokens, 550);
  EXPECT_EQ(a.output_tokens, 3);
  EXPECT_EQ(a.ttft, 50 * k_ms);
  EXPECT_EQ(a.itls, (std::vector<TimeNs>{10 * k_ms, 10 * k_ms}));
  // The second request's times are in sec and us: 0.065 s, gaps 10,000 and 20,000 us.
  const BenchmarkRequest& c = b.requests[1];
  EXPECT_EQ(c.sent, 250 * k_ms);
  EXPECT_EQ(c.ttft, 65 * k_ms);
  EXPECT_EQ(c.itls, (std::vector<TimeNs>{10 * k_ms, 20 * k_ms}));
  EXPECT_EQ(c.decode, 30 * k_ms);
  const BenchmarkRequest& failed = b.requests[2];
  EXPECT_EQ(failed.sent, 500 * k_ms);
  EXPECT_TRUE(failed.failed);
  EXPECT_EQ(failed.failure, "error: prompt too long");
  EXPECT_EQ(failed.input_tokens, 9000);  // error_isl
  // AIPerf's duration: the first send to the last response (the error at 520 ms).
  EXPECT_DOUBLE_EQ(b.duration_s, 0.52);
}

TEST(ServingBenchmarkAiperf, TheSummaryIsSummaryOnlyInMs) {
  const ServingBenchmark b = read_serving_benchmark(fixture("aiperf_profile_export_aiperf.json"));
  EXPECT_EQ(b.format, ServingBenchmarkFormat::aiperf);
  ASSERT_TRUE(b.summary_only.has_value());
  EXPECT_EQ(b.summary_only->completed, 100);
  EXPECT_EQ(b.summary_only->sent, 102);  // request_count plus error_request_count
  EXPECT_DOUBLE_EQ(*b.summary_only->mean_input_tokens, 512.4);
  EXPECT_DOUBLE_EQ(*b.summary_only->mean_output_tokens, 99.6);
  EXPECT_EQ(b.summary_only->mean_input_from, "input_sequence_length.avg");
  EXPECT_DOUBLE_EQ(*b.request_rate, 2.0);
  EXPECT_FALSE(b.max_concurrency.has_value());
  EXPECT_DOUBLE_EQ(b.burstiness, 1.0);   // request_rate_mode poisson
  EXPECT_DOUBLE_EQ(b.duration_s, 52.6);  // benchmark_duration in sec
  EXPECT_DOUBLE_EQ(b.summary.at("time_to_first_token.p50"), 42.0);
  EXPECT_EQ(b.model_id, "meta-llama/Llama-3.1-8B-Instruct");
}

// ../shared/benchmarks (README.md there names the sources): vLLM's nightly format and a GuideLLM
// report of a real vLLM deployment.
std::string shared(const std::string& name) {
  return std::string(EXITSIM_SHARED_BENCHMARKS_DIR) + "/" + name;
}

TEST(ServingBenchmarkRealFiles, VllmNightlyIsSummaryOnlyWithoutTotals) {
  const std::string path = shared("vllm_nightly_llama8b_tp1_sharegpt_qps4.json");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (../shared/benchmarks)";
  const ServingBenchmark b = read_serving_benchmark(path);
  ASSERT_TRUE(b.summary_only.has_value());
  EXPECT_EQ(b.summary_only->sent, 200);
  EXPECT_EQ(b.summary_only->completed, 200);
  EXPECT_FALSE(b.summary_only->mean_input_tokens.has_value());  // no token totals in it
  EXPECT_DOUBLE_EQ(*b.request_rate, 4.0);
  EXPECT_DOUBLE_EQ(b.duration_s, 0);  // nor a duration
  EXPECT_NEAR(b.summary.at("median_ttft_ms"), 181.013, 1e-3);
  EXPECT_NEAR(b.summary.at("p99_itl_ms"), 263.003, 1e-3);
}

TEST(ServingBenchmarkRealFiles, GuidellmReportHasFiveRunsOfFortyRequests) {
  const std::string path = shared("guidellm_llama2_7b_tp1_h100.json");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (../shared/benchmarks)";
  const std::vector<ServingBenchmark> runs = read_serving_benchmark_runs(path);
  ASSERT_EQ(runs.size(), 5u);
  const char* names[] = {"synchronous", "throughput (512 in flight at most)",
                         "constant at 1.952 req/s", "constant at 2.897 req/s",
                         "constant at 3.842 req/s"};
  const std::int64_t failed[] = {0, 1, 0, 0, 2};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(runs[i].run_name, names[i]);
    EXPECT_EQ(runs[i].requests.size(), 40u) << i;
    EXPECT_EQ(runs[i].failed_requests(), failed[i]) << i;
    EXPECT_TRUE(runs[i].arrivals_recorded()) << i;
  }
  // The first request sent: 2,998 prompt tokens, 56 out, its TTFT 347.539 ms.
  const BenchmarkRequest& first = runs[0].requests[0];
  EXPECT_EQ(first.sent, 0);
  EXPECT_EQ(first.input_tokens, 2998);
  EXPECT_EQ(first.output_tokens, 56);
  EXPECT_NEAR(static_cast<double>(first.ttft) / 1e6, 347.539, 1e-3);
  EXPECT_NEAR(static_cast<double>(first.decode) / 1e6, 26.0192 * 55, 1e-2);
}

TEST(ServingBenchmarkRealFiles, OpenTelemetrySpansAreRefusedByName) {
  const std::string path = shared("vllm_otel_request_spans_llama2_7b.json");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (../shared/benchmarks)";
  const std::string error = error_of([&] { read_serving_benchmark(path); });
  EXPECT_NE(error.find(": resourceSpans: expected a serving benchmark's result (vLLM, SGLang, "
                       "GuideLLM, AIPerf), found OpenTelemetry spans (OTLP JSON), which exitsim "
                       "does not read"),
            std::string::npos)
      << error;
}

// One edit of a fixture's JSON, and the error after "<file>: " (a prefix of it).
struct Break {
  std::string name;
  std::function<void(json&)> edit;
  std::string expected;
};

void expect_breaks(const std::string& fixture_name, const std::vector<Break>& breaks) {
  TempDir dir;
  const json base = json::parse(test_support::read_file(fixture(fixture_name)));
  for (const Break& b : breaks) {
    json j = base;
    b.edit(j);
    const std::string path = dir.write("result.json", j.dump());
    const std::string error = error_of([&] { read_serving_benchmark_runs(path); });
    EXPECT_EQ(error.rfind(path + ": " + b.expected, 0), 0u)
        << b.name << "\n  got: " << error << "\n  expected: " << path << ": " << b.expected;
    EXPECT_EQ(error.find('\n'), std::string::npos) << b.name;
  }
}

TEST(ServingBenchmarkGuidellm, EveryBreakIsOneLineNamingTheKey) {
  const auto request = [](json& j, int benchmark, int i) -> json& {
    return j["benchmarks"][static_cast<std::size_t>(benchmark)]["requests"]["successful"]
            [static_cast<std::size_t>(i)];
  };
  const std::string at = "benchmarks[1].requests.successful[0].";
  expect_breaks(
      "guidellm_report.json",
      {
          {"prompt tokens a word", [&](json& j) { request(j, 1, 0)["prompt_tokens"] = "x"; },
           at + "prompt_tokens: expected an integer token count >= 1, found \"x\""},
          {"negative ttft", [&](json& j) { request(j, 1, 0)["time_to_first_token_ms"] = -1; },
           at + "time_to_first_token_ms: expected a time to first token in ms, >= 0 and finite, "
                "found -1"},
          {"no send time", [&](json& j) { request(j, 1, 0)["request_start_time"] = nullptr; },
           at + "request_start_time: expected the request's send time in epoch seconds, from 0 "
                "to 4e9 (the year 2096), found null"},
          {"a send time past 2096", [&](json& j) { request(j, 1, 0)["request_start_time"] = 5e9; },
           at + "request_start_time: expected the request's send time in epoch seconds, from 0 "
                "to 4e9 (the year 2096), found "},
          {"no inter-token latency",
           [&](json& j) { request(j, 1, 0).erase("inter_token_latency_ms"); },
           at + "inter_token_latency_ms: expected the request's mean inter-token latency in ms, "
                ">= 0 (it has several output tokens), found none"},
          {"streaming for more than a day",
           // 50,000 s per gap, within a day, but two of them are not.
           [&](json& j) { request(j, 1, 0)["inter_token_latency_ms"] = 5e7; },
           at + "inter_token_latency_ms: expected a request streaming for at most 86400 s (a "
                "day), found "},
          {"a request not an object", [&](json& j) { request(j, 1, 0) = "x"; },
           "benchmarks[1].requests.successful[0]: expected an object (GuideLLM's request stats), "
           "found \"x\""},
          {"successful not a list",
           [](json& j) { j["benchmarks"][0]["requests"]["successful"] = 3; },
           "benchmarks[0].requests.successful: expected a list of GuideLLM's request records, "
           "found 3"},
          {"no requests", [](json& j) { j["benchmarks"][0].erase("requests"); },
           "benchmarks[0].requests: expected an object, found none"},
          {"every request without output",
           [&](json& j) {
             for (int i = 0; i < 3; ++i)
               request(j, 0, i)["output_tokens"] = 0;
           },
           "benchmarks[0].requests: expected at least one successful request to compare"},
          {"no strategy", [](json& j) { j["benchmarks"][0]["config"].erase("strategy"); },
           "benchmarks[0].config.strategy: expected an object, found none"},
          {"a strategy without its type",
           [](json& j) { j["benchmarks"][0]["config"]["strategy"].erase("type_"); },
           "benchmarks[0].config.strategy.type_: expected GuideLLM's strategy type"},
          {"negative rate", [](json& j) { j["benchmarks"][1]["config"]["strategy"]["rate"] = -4; },
           "benchmarks[1].config.strategy.rate: expected a request rate > 0, found -4"},
          {"zero duration", [](json& j) { j["benchmarks"][0]["duration"] = 0; },
           "benchmarks[0].duration: expected the benchmark's duration in seconds > 0, found 0"},
          {"no benchmark", [](json& j) { j["benchmarks"] = json::array(); },
           "benchmarks: expected a list of at least one GuideLLM benchmark, found []"},
      });
}

TEST(ServingBenchmarkAiperf, EveryBreakOfTheSummaryIsOneLineNamingTheKey) {
  expect_breaks(
      "aiperf_profile_export_aiperf.json",
      {
          {"no request count", [](json& j) { j.erase("request_count"); },
           "request_count.avg: expected the number of completed requests (>= 1), found none"},
          {"a time in parsecs", [](json& j) { j["time_to_first_token"]["unit"] = "parsec"; },
           "time_to_first_token.unit: expected a time unit (ns, us, ms or sec), found "
           "\"parsec\""},
          {"a figure a word", [](json& j) { j["request_latency"]["p50"] = "slow"; },
           "request_latency.p50: expected a finite number, found \"slow\""},
          {"negative rate", [](json& j) { j["input_config"]["loadgen"]["request_rate"] = -1; },
           "input_config.loadgen.request_rate: expected a request rate > 0, found -1"},
          {"another rate mode",
           [](json& j) { j["input_config"]["loadgen"]["request_rate_mode"] = "bursty"; },
           "input_config.loadgen.request_rate_mode: expected constant, poisson or "
           "concurrency_burst, found \"bursty\""},
          {"a metric not an object", [](json& j) { j["inter_token_latency"] = 3; },
           "inter_token_latency: expected an object {\"unit\", \"avg\", \"p50\", ...}, found 3"},
      });
}

TEST(ServingBenchmarkAiperf, EveryBreakOfARecordIsOneLineNamingItsLineAndKey) {
  TempDir dir;
  std::vector<std::string> lines;
  std::istringstream text(test_support::read_file(fixture("aiperf_profile_export.jsonl")));
  for (std::string line; std::getline(text, line);)
    lines.push_back(line);
  const struct {
    std::string name;
    std::function<void(json&)> edit;
    std::string expected;  // after "<file>:2: "
  } cases[] = {
      {"send time a word", [](json& j) { j["metadata"]["request_start_ns"] = "x"; },
       "metadata.request_start_ns: expected an epoch time in ns (an integer from 0 to 4e18, the "
       "year 2096), found \"x\""},
      {"ended before it started", [](json& j) { j["metadata"]["request_end_ns"] = 5; },
       "metadata.request_end_ns: expected a time >= request_start_ns (1759813207000000000), "
       "found 5"},
      {"a unit that is no time",
       [](json& j) { j["metrics"]["time_to_first_token"]["unit"] = "tokens"; },
       "metrics.time_to_first_token.unit: expected a time unit (ns, us, ms or sec), found "
       "\"tokens\""},
      {"a gap a word", [](json& j) { j["metrics"]["inter_chunk_latency"]["value"][1] = "x"; },
       "metrics.inter_chunk_latency.value[1]: expected a time >= 0 and finite, found \"x\""},
      {"no prompt length", [](json& j) { j["metrics"].erase("input_sequence_length"); },
       "metrics.input_sequence_length: expected the prompt's tokens, found none"},
      {"no metrics", [](json& j) { j.erase("metrics"); },
       "metrics: expected an object, found none"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> edited = lines;
    json j = json::parse(edited[1]);
    c.edit(j);
    edited[1] = j.dump();
    std::string content;
    for (const std::string& line : edited)
      content += line + "\n";
    const std::string path = dir.write("profile_export.jsonl", content);
    const std::string error = error_of([&] { read_serving_benchmark_runs(path); });
    EXPECT_EQ(error.rfind(path + ":2: " + c.expected, 0), 0u)
        << c.name << "\n  got: " << error << "\n  expected: " << path << ":2: " << c.expected;
  }
  // A broken line is named by its number.
  std::string broken = lines[0] + "\n" + lines[1] + "\n{\"metadata\": \n";
  const std::string path = dir.write("broken.jsonl", broken);
  EXPECT_EQ(error_of([&] { read_serving_benchmark_runs(path); })
                .rfind(path + ":3: expected a JSON object (a line of JSON Lines), found invalid "
                              "JSON",
                       0),
            0u);
}

}  // namespace
}  // namespace exitsim::traces
