// Vidur length and arrival traces, and BurstGPT traces.
#include <gtest/gtest.h>

#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;

const std::string k_vidur_header =
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n";
const std::string k_burst_header =
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log "
    "Type\n";

TEST(RequestVidur, ReadsLengthsWithoutArrivals) {
  TempDir dir;
  const auto path = dir.write("v.csv", k_vidur_header +
                                           "3772,54,3826,69.85185185185185\n"
                                           "2015,156,2171,12.916666666666666");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::vidur);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "vidur");
  EXPECT_FALSE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 3772, 54));
  EXPECT_EQ(result.requests[1], request(1, std::nullopt, 2015, 156));
}

TEST(RequestVidur, TwoColumnHeaderIsEnough) {
  TempDir dir;
  const auto path = dir.write("v.csv", "num_prefill_tokens,num_decode_tokens\r\n7,8\r\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 1U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 7, 8));
}

TEST(RequestVidur, MalformedRows) {
  TempDir dir;
  const auto check = [&](const std::string& row, const std::string& expected) {
    const auto path = dir.write("bad.csv", k_vidur_header + "1,1,2,1.0\n" + row);
    EXPECT_EQ(error_of(path), path + ":3:" + expected) << row;
  };
  check("5,6,11\n", "7: pd_ratio: expected 4 fields, found 3");
  check("5,6,11,0.8,1\n", "12: expected 4 fields, found 5");
  check("5,six,11,0.8\n", "3: num_decode_tokens: expected an integer token count, found \"six\"");
  check("0,6,6,0\n", "1: num_prefill_tokens: expected a token count of at least 1, found 0");
  check("5,0,5,inf\n", "3: num_decode_tokens: expected a token count of at least 1, found 0");
}

TEST(RequestVidur, ReadsArrivalTracesInSeconds) {
  TempDir dir;
  // Vidur's own arrival traces, as splitwise_conv.csv; Python writes small floats as 1e-05.
  const auto path = dir.write("splitwise_conv.csv",
                              "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                              "0.0,374,44\n"
                              "1e-05,396,109\n"
                              "2.828480710548229,2015,156\n");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::vidur);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "vidur");
  EXPECT_TRUE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 3U);
  EXPECT_EQ(result.requests[0], request(0, 0, 374, 44));
  EXPECT_EQ(result.requests[1], request(1, 10'000, 396, 109));
  // 2.828480710|548229 s: rounded up at the nanosecond.
  EXPECT_EQ(result.requests[2], request(2, 2'828'480'711, 2015, 156));
}

TEST(RequestVidur, ArrivalTracesIgnoreFurtherColumnsAndRebaseOnTheFirstArrival) {
  TempDir dir;
  const auto path = dir.write("t.csv",
                              "arrived_at,num_prefill_tokens,num_decode_tokens,request_id\n"
                              "10.5,7,8,0\n"
                              "12,9,10,1\n");
  const auto result = read_all(path, RequestTraceOptions{RequestTraceFormat::vidur, false});
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, 0, 7, 8));
  EXPECT_EQ(result.requests[1], request(1, 1'500'000'000, 9, 10));
}

TEST(RequestVidur, MalformedArrivalRows) {
  TempDir dir;
  const auto check = [&](const std::string& row, const std::string& expected) {
    const auto path = dir.write("bad.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                                               std::string("5,1,1\n") + row);
    EXPECT_EQ(error_of(path), path + ":3:" + expected) << row;
  };
  check("4.5,1,1\n",
        "1: arrived_at: expected a time at or after the previous request's \"5\", found \"4.5\"");
  check("-6,1,1\n",
        "1: arrived_at: expected a non-negative decimal number of seconds, found \"-6\"");
  check("nan,1,1\n",
        "1: arrived_at: expected a non-negative decimal number of seconds, found \"nan\"");
  check("6e+-1,1,1\n",
        "1: arrived_at: expected a non-negative decimal number of seconds, found \"6e+-1\"");
  check("6,1.5,1\n", "3: num_prefill_tokens: expected an integer token count, found \"1.5\"");
  check(",1,1\n",
        "1: arrived_at: expected a non-negative decimal number of seconds, found an "
        "empty field");
  check("6,1\n", "4: num_decode_tokens: expected 3 fields, found 2");
}

TEST(RequestVidur, ForcedFormatNamesBothHeaders) {
  TempDir dir;
  const auto path = dir.write("v.csv", "arrived_at,num_decode_tokens,num_prefill_tokens\n1,1,1\n");
  EXPECT_EQ(error_of(path, RequestTraceOptions{RequestTraceFormat::vidur, false}),
            path +
                ":1:1: expected a vidur header starting \"num_prefill_tokens,num_decode_tokens\" "
                "or \"arrived_at,num_prefill_tokens,num_decode_tokens\", found "
                "\"arrived_at,num_decode_tokens,num_prefill_tokens\"");
}

TEST(RequestBurstGpt, SkipsFailedRequestsAndReadsFractionalSeconds) {
  TempDir dir;
  const auto path = dir.write("b.csv", k_burst_header +
                                           "5,1,2.5,ChatGPT,472,18,490,Conversation log\n"
                                           "5.25,2,0,ChatGPT,100,0,100,Conversation log\n"
                                           "45.0000000016,3,3.1,GPT-4,1024,300,1324,API log\n");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::burstgpt);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "burstgpt");
  EXPECT_TRUE(result.has_arrivals);
  EXPECT_EQ(result.skipped, 1);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, 0, 472, 18));
  // Rounded to the nearest nanosecond.
  EXPECT_EQ(result.requests[1], request(1, 40 * k_ns_per_s + 2, 1024, 300));
}

TEST(RequestBurstGpt, FindsColumnsByName) {
  TempDir dir;
  const auto path = dir.write("b.csv",
                              "Model,Response tokens,Request tokens,Timestamp\n"
                              "GPT-4,7,9,1.5\n"
                              "GPT-4,8,10,2\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, 0, 9, 7));
  EXPECT_EQ(result.requests[1], request(1, k_ns_per_s / 2, 10, 8));
}

TEST(RequestBurstGpt, MalformedRows) {
  TempDir dir;
  const auto check = [&](const std::string& row, const std::string& expected) {
    const auto path = dir.write("bad.csv", k_burst_header + "10,1,1,ChatGPT,5,5,10,log\n" + row);
    EXPECT_EQ(error_of(path), path + ":3:" + expected) << row;
  };
  check("9.5,1,1,ChatGPT,5,5,10,log\n",
        "1: Timestamp: expected a time at or after the previous request's \"10\", found \"9.5\"");
  check("-1,1,1,ChatGPT,5,5,10,log\n",
        "1: Timestamp: expected a non-negative decimal number of seconds, found \"-1\"");
  check("1e3,1,1,ChatGPT,5,5,10,log\n",
        "1: Timestamp: expected a non-negative decimal number of seconds, found \"1e3\"");
  check("11,1,1,ChatGPT,0,5,5,log\n",
        "16: Request tokens: expected a token count of at least 1, found 0");
  check("11,1,1,ChatGPT,5,-2,3,log\n",
        "18: Response tokens: expected a token count of at least 1, found -2");
  check("11,1,1,ChatGPT,5\n", "17: Response tokens: expected 8 fields, found 5");
  check("11,1,1,ChatGPT,5,5,10,log,extra\n", "27: expected 8 fields, found 9");
}

TEST(RequestBurstGpt, HeaderNeedsTheRequiredColumns) {
  TempDir dir;
  const auto path = dir.write("b.csv", "Timestamp,Model,Request tokens\n1,GPT-4,5\n");
  EXPECT_EQ(error_of(path, RequestTraceOptions{RequestTraceFormat::burstgpt, false}),
            path +
                ":1:1: expected a burstgpt header with columns \"Timestamp\", \"Request tokens\" "
                "and \"Response tokens\", found \"Timestamp,Model,Request tokens\"");
}

}  // namespace
}  // namespace exitsim::traces

namespace exitsim::traces {
namespace {

// A serving benchmark's result given as a trace (`trace inspect`, workload.trace) is told apart
// from the traces: a vLLM or SGLang result points to `validate --against`, a GuideLLM report says
// it is not read; a Mooncake line, also a JSON object, is still a trace.
TEST(RequestTraceDetection, ABenchmarkResultIsToldApartAndPointedToValidate) {
  TempDir dir;
  const std::string header =
      ":1:1: expected a request-trace header (one of azure, vidur, mooncake, burstgpt, native, "
      "tracev2, sharegpt), found ";
  const std::string validate =
      ", not a request trace: compare the simulator with it by `exitsim validate SCENARIO "
      "--against FILE`";
  // A summary-only result (the whole file in the head, no per-request lists).
  const auto vllm = dir.write(
      "result.json",
      R"({"date": "20251201-120000", "backend": "vllm", "burstiness": 1.0, "mean_ttft_ms": 12.5})");
  EXPECT_EQ(test_support::error_of(vllm),
            vllm + header +
                "a summary-only vLLM or SGLang serving-benchmark result (figures, no per-request "
                "lists: compared on its figures, its requests reconstructed)" +
                validate);
  const std::string fixtures = std::string(EXITSIM_SOURCE_DIR) + "/tests/traces/serving_benchmark/";
  const struct {
    std::string file, kind;
  } kinds[] = {
      {"vllm_result.json", "a vLLM or SGLang serving-benchmark result (per-request lists)"},
      {"guidellm_report.json", "a GuideLLM report (a run per benchmark; --run K picks one)"},
      {"aiperf_profile_export.jsonl", "an AIPerf profile_export.jsonl (per-request records)"},
      {"aiperf_profile_export_aiperf.json",
       "an AIPerf summary (profile_export_aiperf.json: figures only, compared as such)"},
  };
  for (const auto& k : kinds) {
    const std::string path = fixtures + k.file;
    EXPECT_EQ(test_support::error_of(path), path + header + k.kind + validate) << k.file;
  }
  const auto spans = dir.write(
      "spans.json",
      R"({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "llm_request", "attributes": )"
      R"([{"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.3}}]}]}]}]})");
  EXPECT_EQ(test_support::error_of(spans),
            spans + header +
                "OpenTelemetry spans (OTLP JSON: a vLLM server's llm_request spans, each "
                "request's queue, prefill and decode times), not a request trace nor a benchmark "
                "result exitsim reads: compare the simulator with the benchmark run they were "
                "recorded under (its vLLM, SGLang, GuideLLM or AIPerf result) by `exitsim "
                "validate SCENARIO --against FILE`");
  const auto mooncake = dir.write(
      "m.jsonl", R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]})");
  EXPECT_EQ(detect_request_trace_format(mooncake), RequestTraceFormat::mooncake);
}

}  // namespace
}  // namespace exitsim::traces
