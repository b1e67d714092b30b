// vLLM and SGLang serving-benchmark results (exitsim/traces/serving_benchmark.hpp): the fixtures
// under tests/traces/serving_benchmark/ read exactly, and a bad-input matrix where every break is
// refused with one line naming the file and the JSON key path.
#include "exitsim/traces/serving_benchmark.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "exitsim/core/error.hpp"
#include "support/test_files.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;
using test_support::error_of;
using test_support::k_no_error;
using test_support::TempDir;

std::string fixture(const std::string& name) {
  return std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/" + name;
}

TEST(ServingBenchmark, ReadsTheVllmFixtureExactly) {
  const ServingBenchmark b = read_serving_benchmark(fixture("vllm_result.json"));
  EXPECT_EQ(b.format, ServingBenchmarkFormat::vllm);
  EXPECT_EQ(b.line, 0);
  EXPECT_EQ(b.backend, "vllm");
  EXPECT_EQ(b.model_id, "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ(b.date, "20251201-120000");
  ASSERT_TRUE(b.request_rate.has_value());
  EXPECT_DOUBLE_EQ(*b.request_rate, 5.0);
  EXPECT_DOUBLE_EQ(b.burstiness, 1.0);
  EXPECT_TRUE(b.burstiness_given);
  EXPECT_FALSE(b.max_concurrency.has_value());
  EXPECT_DOUBLE_EQ(b.duration_s, 4.5);
  ASSERT_EQ(b.requests.size(), 20u);
  for (std::size_t i = 0; i < b.requests.size(); ++i) {
    const BenchmarkRequest& r = b.requests[i];
    const auto k = static_cast<std::int64_t>(i);
    EXPECT_EQ(r.input_tokens, 100 + 10 * k) << i;
    if (i == 7) {  // the failed request: error text, no output, ttft 0
      EXPECT_TRUE(r.failed);
      EXPECT_EQ(r.failure, "error: Bad Request");
      EXPECT_EQ(r.output_tokens, 0);
      EXPECT_TRUE(r.itls.empty());
      continue;
    }
    EXPECT_FALSE(r.failed) << i;
    EXPECT_EQ(r.output_tokens, 5 + k % 4) << i;
    EXPECT_EQ(r.ttft, 50'000'000 + 1'000'000 * k) << i;  // seconds in the file, ns here
    if (i == 3) {  // one chunk carried two tokens: one gap fewer, and it is twice as long
      EXPECT_EQ(r.itls, (std::vector<TimeNs>{20'000'000, 20'000'000, 20'000'000, 20'000'000,
                                             20'000'000, 40'000'000}));
    } else {
      EXPECT_EQ(r.itls,
                std::vector<TimeNs>(static_cast<std::size_t>(r.output_tokens - 1), 20'000'000))
          << i;
    }
  }
  EXPECT_EQ(b.failed_requests(), 1);
  ASSERT_TRUE(b.summary.contains("median_ttft_ms"));
  EXPECT_NEAR(b.summary.at("median_ttft_ms"), 60.0, 1e-9);
}

TEST(ServingBenchmark, ReadsEveryLineOfSglangJsonLinesAsARun) {
  const std::vector<ServingBenchmark> runs =
      read_serving_benchmark_runs(fixture("sglang_result.jsonl"));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].line, 1);
  EXPECT_EQ(runs[0].run, 1);
  ASSERT_TRUE(runs[0].request_rate.has_value());
  EXPECT_DOUBLE_EQ(*runs[0].request_rate, 2.0);
  EXPECT_EQ(runs[0].requests[0].input_tokens, 50);  // the first run's lengths
  // read_serving_benchmark gives the last run.
  const ServingBenchmark b = read_serving_benchmark(fixture("sglang_result.jsonl"));
  EXPECT_EQ(b.format, ServingBenchmarkFormat::sglang);
  EXPECT_EQ(b.line, 2);
  EXPECT_EQ(b.run, 2);
  EXPECT_EQ(b.runs, 2);
  EXPECT_EQ(b.backend, "sglang");
  EXPECT_EQ(b.model_id, "");
  EXPECT_FALSE(b.request_rate.has_value());  // Python's bare Infinity
  EXPECT_FALSE(b.burstiness_given);
  ASSERT_EQ(b.requests.size(), 6u);
  EXPECT_EQ(b.requests[0].input_tokens, 51);  // the second run's lengths
  EXPECT_EQ(b.requests[5].ttft, 600'000'000);
  EXPECT_EQ(b.requests[2].itls, (std::vector<TimeNs>{10'000'000, 10'000'000}));
  EXPECT_EQ(b.requests[2].decode, 20'000'000);
  EXPECT_FALSE(b.arrivals_recorded());
  EXPECT_EQ(b.failed_requests(), 0);
}

// The vLLM fixture, changed by one edit.
struct Break {
  std::string name;
  std::function<void(json&)> edit;
  std::string expected;  // the error after "<file>: "
};

std::vector<Break> breaks() {
  return {
      {"no input_lens", [](json& j) { j.erase("input_lens"); },
       "input_lens: expected a list of one entry per request"},
      // vLLM's nightly format, or a result saved without --save-detailed: figures, no requests,
      // read as summary-only; without a count its requests cannot be made up.
      {"summary only without a request count",
       [](json& j) {
         for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "errors", "duration",
                               "num_prompts", "completed"})
           j.erase(k);
       },
       "num_prompts: expected the number of requests sent (num_prompts, else completed): a "
       "summary-only result's requests are reconstructed from it, found none"},
      {"summary only, more completed than sent",
       [](json& j) {
         for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "errors"})
           j.erase(k);
         j["completed"] = 21;
       },
       "completed: expected at most num_prompts (20), found 21"},
      {"summary only, a negative token total",
       [](json& j) {
         for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "errors"})
           j.erase(k);
         j["total_input_tokens"] = -5;
       },
       "total_input_tokens: expected a token count >= 0, found -5"},
      {"summary only, num_prompts a word",
       [](json& j) {
         for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "errors"})
           j.erase(k);
         j["num_prompts"] = "many";
       },
       "num_prompts: expected an integer >= 1 (requests), found \"many\""},
      {"input_lens not a list", [](json& j) { j["input_lens"] = 3; },
       "input_lens: expected a list of one entry per request"},
      {"empty lists",
       [](json& j) {
         for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "errors"})
           j[k] = json::array();
       },
       "input_lens: expected a list of at least one request, found []"},
      {"lists of different lengths", [](json& j) { j["ttfts"].erase(0); },
       "ttfts: expected 20 entries, as many as input_lens, found 19"},
      {"errors of another length", [](json& j) { j["errors"].push_back(""); },
       "errors: expected 20 entries, as many as input_lens, found 21"},
      {"negative ttft", [](json& j) { j["ttfts"][2] = -0.5; },
       "ttfts[2]: expected a time to first token in seconds, >= 0 and finite, found -0.5"},
      {"ttft a string", [](json& j) { j["ttfts"][4] = "fast"; },
       "ttfts[4]: expected a time to first token in seconds, >= 0 and finite, found \"fast\""},
      {"itl not a list", [](json& j) { j["itls"][3] = "x"; },
       "itls[3]: expected a list of numbers (seconds), found \"x\""},
      {"itl entry a string", [](json& j) { j["itls"][5][1] = "x"; },
       "itls[5][1]: expected an inter-token latency in seconds, >= 0 and finite, found \"x\""},
      {"too many itls", [](json& j) { j["itls"][0].push_back(0.02); },
       "itls[0]: expected at most output_lens[0] - 1 = 4 gaps (one per streamed chunk after the "
       "first), found 5"},
      {"negative output_len", [](json& j) { j["output_lens"][1] = -1; },
       "output_lens[1]: expected an integer token count >= 0 (at most 2^31), found -1"},
      {"zero input_len", [](json& j) { j["input_lens"][0] = 0; },
       "input_lens[0]: expected an integer token count >= 1 (at most 2^31), found 0"},
      {"fractional input_len", [](json& j) { j["input_lens"][0] = 10.5; },
       "input_lens[0]: expected an integer token count >= 1, found 10.5"},
      {"negative request_rate", [](json& j) { j["request_rate"] = -2; },
       "request_rate: expected a request rate (a number > 0 or \"inf\"), found -2"},
      {"request_rate a word", [](json& j) { j["request_rate"] = "fast"; },
       "request_rate: expected a request rate (a number > 0 or \"inf\"), found \"fast\""},
      {"no request_rate", [](json& j) { j.erase("request_rate"); },
       "request_rate: expected a request rate (a number > 0 or \"inf\"), found none"},
      {"zero burstiness", [](json& j) { j["burstiness"] = 0; },
       "burstiness: expected a burstiness > 0 (the gamma shape), found 0"},
      {"negative burstiness", [](json& j) { j["burstiness"] = -1.5; },
       "burstiness: expected a burstiness > 0 (the gamma shape), found -1.5"},
      {"zero duration", [](json& j) { j["duration"] = 0; },
       "duration: expected the benchmark's duration in seconds > 0, found 0"},
      {"negative duration", [](json& j) { j["duration"] = -3.0; },
       "duration: expected the benchmark's duration in seconds > 0, found -3.0"},
      {"max_concurrency zero", [](json& j) { j["max_concurrency"] = 0; },
       "max_concurrency: expected null or an integer >= 1, found 0"},
      {"ramp-up", [](json& j) { j["ramp_up_strategy"] = "linear"; },
       "ramp_up_strategy: expected null (a request rate that ramps up is not reconstructed"},
      {"error not a string", [](json& j) { j["errors"][2] = 5; },
       "errors[2]: expected a string (empty: no error) or null, found 5"},
      {"every request failed",
       [](json& j) {
         for (auto& e : j["errors"])
           e = "boom";
       },
       "expected at least one successful request"},
      {"neither format",
       [](json& j) {
         j.erase("model_id");
         j.erase("burstiness");
       },
       "expected a vLLM result (with model_id or burstiness), an SGLang one (with server_info), "
       "a GuideLLM report"},
      {"backend a number", [](json& j) { j["backend"] = 1; },
       "backend: expected a string, found 1"},
      // N6: each gap within its day, the request's sum past it (150,000 such gaps would wrap
      // int64 nanoseconds).
      {"a request streaming for more than a day",
       [](json& j) {
         j["output_lens"][0] = 200000;
         j["ttfts"][0] = 0.5;
         j["itls"][0] = json::array({86399.0, 1.0});
       },
       "itls[0][1]: expected ttfts[0] plus itls[0] of at most 86400 s (a day), found 86400.500 s "
       "by this gap"},
  };
}

std::string fixture_text() {
  return test_support::read_file(fixture("vllm_result.json"));
}

TEST(ServingBenchmark, EveryBreakIsOneLineNamingTheKey) {
  TempDir dir;
  const json base = json::parse(fixture_text());
  for (const Break& b : breaks()) {
    json j = base;
    b.edit(j);
    const std::string path = dir.write("result.json", j.dump());
    const std::string error = error_of([&] { read_serving_benchmark(path); });
    EXPECT_EQ(error.rfind(path + ": " + b.expected, 0), 0u)
        << b.name << "\n  got: " << error << "\n  expected: " << path << ": " << b.expected;
    EXPECT_EQ(error.find('\n'), std::string::npos) << b.name;
  }
}

TEST(ServingBenchmark, ARequestOfExactlyADayIsRead) {
  TempDir dir;
  json j = json::parse(fixture_text());
  j["output_lens"][0] = 200000;
  j["ttfts"][0] = 0.5;
  j["itls"][0] = json::array({86399.0, 0.5});
  const ServingBenchmark b = read_serving_benchmark(dir.write("result.json", j.dump()));
  EXPECT_EQ(b.requests[0].ttft + b.requests[0].itls[0] + b.requests[0].itls[1], 86400 * k_ns_per_s);
}

TEST(ServingBenchmark, TextBreaksAreRefusedByName) {
  TempDir dir;
  std::string text = fixture_text();
  const struct {
    std::string name, content, expected;
  } cases[] = {
      {"not JSON", "this is not json",
       ": expected a benchmark result (one JSON object: vLLM, GuideLLM, AIPerf's summary) or "
       "JSON Lines (SGLang, AIPerf's records), found invalid JSON at byte"},
      {"empty file", "",
       ": expected a benchmark result (one JSON object: vLLM, GuideLLM, AIPerf's summary) or "
       "JSON Lines (SGLang, AIPerf's records), found an empty file"},
      {"a list", "[1, 2]", ": expected a JSON object of a vLLM or SGLang benchmark result"},
      {"NaN ttft (Python's json.dumps)",
       [&] {
         std::string t = text;
         const std::size_t at = t.find("\"ttfts\": [") + 10;
         return t.replace(at, t.find(',', at) - at, "NaN");
       }(),
       ": ttfts[0]: expected a time to first token in seconds, >= 0 and finite, found \"nan\""},
      {"Infinity itl",
       [&] {
         std::string t = text;
         const std::size_t at = t.find("\"itls\": [[") + 10;
         return t.replace(at, t.find(',', at) - at, "Infinity");
       }(),
       ": itls[0][0]: expected an inter-token latency in seconds, >= 0 and finite, found "
       "\"inf\""},
      {"JSON Lines with a broken last line", text + "\n{\"backend\": \n",
       ":2: expected a JSON object (a line of JSON Lines), found invalid JSON"},
  };
  for (const auto& c : cases) {
    const std::string path = dir.write("result.json", c.content);
    const std::string error = error_of([&] { read_serving_benchmark(path); });
    EXPECT_EQ(error.rfind(path + c.expected, 0), 0u)
        << c.name << "\n  got: " << error << "\n  expected: " << path << c.expected;
  }
  EXPECT_NE(error_of([&] { read_serving_benchmark(dir.path("missing.json")); }), k_no_error);
}

TEST(ServingBenchmark, InfiniteRateAndBurstinessRead) {
  TempDir dir;
  json j = json::parse(fixture_text());
  j["request_rate"] = "inf";
  j["burstiness"] = "inf";
  j["max_concurrency"] = 16;
  const ServingBenchmark b = read_serving_benchmark(dir.write("r.json", j.dump()));
  EXPECT_FALSE(b.request_rate.has_value());
  EXPECT_TRUE(std::isinf(b.burstiness));
  EXPECT_EQ(b.max_concurrency, 16);
}

}  // namespace
}  // namespace exitsim::traces
