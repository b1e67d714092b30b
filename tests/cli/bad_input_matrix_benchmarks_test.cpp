// The bad-input matrix of issue 19 for serving-benchmark results, through `validate SCENARIO
// --against FILE -o DIR`: every kind exitsim reads (the fixtures of
// tests/traces/serving_benchmark/) runs, and a broken one of each kind is refused on one line
// naming the file and the key, leaving the output folder empty.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/bad_file_matrix.hpp"
#include "support/test_files.hpp"

namespace {

using namespace cli_support;
using namespace bad_file_matrix;

std::string fixture_text(const std::string& name) {
  return exitsim::test_support::read_file(std::string(EXITSIM_SOURCE_DIR) +
                                          "/tests/traces/serving_benchmark/" + name);
}

TEST_F(BadFileMatrix, ServingBenchmarkResultsRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const std::string vllm = fixture_text("vllm_result.json");
  const std::string vllm_summary = fixture_text("vllm_summary_only.json");
  const std::string sglang_summary = fixture_text("sglang_summary_only.jsonl");
  const std::string guidellm = fixture_text("guidellm_report.json");
  const std::string aiperf = fixture_text("aiperf_profile_export.jsonl");
  const std::string aiperf_summary = fixture_text("aiperf_profile_export_aiperf.json");
  const std::vector<Case> cases = {
      accepted("vLLM, detailed", vllm),
      accepted("vLLM, summary only", vllm_summary),
      accepted("SGLang, summary only", sglang_summary),
      accepted("GuideLLM", guidellm),
      accepted("AIPerf records", aiperf),
      accepted("AIPerf summary", aiperf_summary),
      refused("empty", "", "found an empty file"),
      refused("GuideLLM truncated", guidellm.substr(0, guidellm.size() / 2),
              "expected a benchmark result (one JSON object: vLLM, GuideLLM, AIPerf's summary) or "
              "JSON Lines (SGLang, AIPerf's records), found invalid JSON at byte"),
      refused(
          "GuideLLM, a NaN TTFT",
          replaced(guidellm, "\"time_to_first_token_ms\": 50.0", "\"time_to_first_token_ms\": NaN"),
          "benchmarks[0].requests.successful[0].time_to_first_token_ms: expected a time to first "
          "token in ms, >= 0 and finite, found \"nan\""),
      refused("GuideLLM, a benchmark without requests",
              replaced(guidellm, "\"requests\": {", "\"requestz\": {"),
              "benchmarks[0].requests: expected an object, found none"),
      refused("AIPerf record, a length unit for a time",
              replaced(aiperf, "\"time_to_first_token\": {\"value\": 50.0, \"unit\": \"ms\"}",
                       "\"time_to_first_token\": {\"value\": 50.0, \"unit\": \"tokens\"}"),
              ":2: metrics.time_to_first_token.unit: expected a time unit (ns, us, ms or sec), "
              "found \"tokens\""),
      refused("AIPerf summary without a request count",
              replaced(aiperf_summary, "\"request_count\"", "\"request_countz\""),
              "request_count.avg: expected the number of completed requests (>= 1), found none"),
      refused("vLLM summary without a count",
              replaced(replaced(vllm_summary, "\"num_prompts\"", "\"num_promptz\""),
                       "\"completed\"", "\"completez\""),
              "num_prompts: expected the number of requests sent (num_prompts, else completed)"),
      refused("a summary without a figure exitsim compares",
              R"({"model_id": "m", "request_rate": 1, "num_prompts": 10, "std_ttft_ms": 5})",
              "expected at least one figure exitsim compares"),
      refused("SGLang, a broken second run", sglang_summary + "{\"backend\": \n",
              ":3: expected a JSON object (a line of JSON Lines), found invalid JSON"),
      refused("OpenTelemetry spans",
              R"({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "llm_request"}]}]}]})",
              "resourceSpans: expected a serving benchmark's result (vLLM, SGLang, GuideLLM, "
              "AIPerf), found OpenTelemetry spans"),
  };
  const fs::path in = dir_ / "result.json";
  const int refusals = check(cases, in, [&](const fs::path& out) {
    return "validate scenarios/default.yaml --arrival-seeds 1 --against " + quoted(in) + " -o " +
           quoted(out / "v");
  });
  EXPECT_EQ(refusals, 10);
}

}  // namespace
