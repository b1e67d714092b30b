// BLIS (inference-sim) TraceV2 data files: read, and written back as a TraceV2 pair.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "exitsim/traces/tracev2_writer.hpp"
#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;
using test_support::VectorSource;

// BLIS's columns with all four optional ones it may add: vllm_priority after slo_class,
// slo_target_us after deadline_us, x_request_id and adapter at the end.
const std::string k_header =
    "request_id,client_id,tenant_id,slo_class,vllm_priority,session_id,round_index,prefix_group,"
    "prefix_length,streaming,input_tokens,output_tokens,text_tokens,image_tokens,audio_tokens,"
    "video_tokens,reason_ratio,model,deadline_us,slo_target_us,server_input_tokens,"
    "arrival_time_us,send_time_us,first_chunk_time_us,last_chunk_time_us,num_chunks,status,"
    "error_message,finish_reason,x_request_id,adapter\n";

struct Row {
  std::string prefix_group{};
  std::string prefix_length = "0";
  std::string input = "100";
  std::string output = "20";
  std::string server_input = "0";
  std::string arrival_us = "0";
  std::string error_message{};
};

std::string row(int id, const Row& r) {
  return fmt::format(
      "{},client-a,tenant,standard,1,,0,{},{},true,{},{},{},0,0,0,0.25,meta-llama/Llama-3.1-8B,0,"
      "0,{},{},{},0,0,0,ok,{},stop,uuid-{},\n",
      id, r.prefix_group, r.prefix_length, r.input, r.output, r.input, r.server_input, r.arrival_us,
      r.arrival_us, r.error_message, id);
}

TEST(RequestTraceV2, ReadsPromptsAsBlisReplaysThem) {
  TempDir dir;
  const auto path = dir.write(
      "trace.csv", k_header + row(0, Row{}) +
                       // A shared prefix: input_tokens counts only the suffix after it.
                       row(1, Row{"system", "512", "88", "30", "650", "500000", ""}) +
                       // No prefix: the server's count of the prompt is preferred when recorded.
                       row(2, Row{"", "0", "70", "5", "75", "1500000", ""}) +
                       // A quoted message holding a comma, as Go's encoding/csv writes it.
                       row(3, Row{"", "0", "9", "1", "0", "1500001", "\"timeout, \"\"busy\"\"\""}));
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::tracev2);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "tracev2");
  EXPECT_TRUE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 4U);
  EXPECT_EQ(result.requests[0], request(0, 0, 100, 20));
  EXPECT_EQ(result.requests[1], request(1, 500'000'000, 600, 30));
  EXPECT_EQ(result.requests[2], request(2, 1'500'000'000, 75, 5));
  EXPECT_EQ(result.requests[3], request(3, 1'500'001'000, 9, 1));
}

TEST(RequestTraceV2, MalformedRows) {
  TempDir dir;
  const auto check = [&](const Row& bad, const std::string& expected) {
    const auto path =
        dir.write("bad.csv", k_header + row(0, Row{"", "0", "1", "1", "0", "10"}) + row(1, bad));
    const std::string error = error_of(path);
    EXPECT_EQ(error.substr(0, path.size() + 3), path + ":3:") << error;
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  };
  check(Row{"", "0", "1", "1", "0", "9"},
        "arrival_time_us: expected a time at or after the previous request's \"10\", found "
        "\"9\"");
  check(Row{"", "0", "1", "1", "0", "-5"},
        "arrival_time_us: expected a non-negative integer number of microseconds, found \"-5\"");
  check(Row{"", "0", "1", "1", "0", "10.5"},
        "arrival_time_us: expected a non-negative integer number of microseconds, found "
        "\"10.5\"");
  check(Row{"", "0", "0", "1", "0", "10"},
        "input_tokens: expected a token count of at least 1, found 0");
  check(Row{"", "0", "-3", "1", "0", "10"},
        "input_tokens: expected an integer token count from 0 to 2147483648, found \"-3\"");
  check(Row{"g", "x", "1", "1", "0", "10"},
        "prefix_length: expected an integer token count from 0 to 2147483648, found \"x\"");
  check(Row{"", "0", "1", "0", "0", "10"},
        "output_tokens: expected a token count of at least 1, found 0");
  check(Row{"", "0", "1", "1", "0", "11", "\"no end"},
        "expected a closing quote on the same line (quoted line breaks are not supported), found "
        "the end of the line");
  check(Row{"", "0", "1", "1", "0", "11", "\"a\"b"},
        "expected a comma after a closing quote, found \"b\"");
}

TEST(RequestTraceV2, HeaderNeedsTheRequestColumns) {
  TempDir dir;
  const auto path = dir.write("t.csv", "request_id,input_tokens,output_tokens\n0,1,1\n");
  EXPECT_EQ(error_of(path, RequestTraceOptions{RequestTraceFormat::tracev2, false}),
            path +
                ":1:1: expected a tracev2 header with columns \"request_id\", \"input_tokens\", "
                "\"output_tokens\" and \"arrival_time_us\", found "
                "\"request_id,input_tokens,output_tokens\"");
}

TEST(RequestTraceV2, WriterRoundTripsAndSaysWhatItRounded) {
  TempDir dir;
  VectorSource source({request(0, 0, 374, 44), request(1, 4'314'579'000, 396, 109),
                       request(2, 4'314'579'500, 1, 1), request(3, 4'314'580'499, 2, 2)});
  const std::string data = dir.path("out.csv");
  const TraceV2WriteReport report = write_tracev2_request_trace(source, data);
  EXPECT_EQ(report.written, 4);
  EXPECT_EQ(report.arrivals_rounded, 2);
  EXPECT_EQ(report.prefix_hashes_dropped, 0);
  EXPECT_EQ(report.header_path, dir.path("out.yaml"));
  EXPECT_EQ(test_support::read_file(report.header_path),
            "trace_version: 2\ntime_unit: us\nmode: generated\nwarm_up_requests: 0\n");
  const auto back = read_all(data);
  EXPECT_EQ(back.format, "tracev2");
  ASSERT_EQ(back.requests.size(), 4U);
  EXPECT_EQ(back.requests[0], request(0, 0, 374, 44));
  EXPECT_EQ(back.requests[1], request(1, 4'314'579'000, 396, 109));
  EXPECT_EQ(back.requests[2], request(2, 4'314'580'000, 1, 1));  // 500 ns rounds up
  EXPECT_EQ(back.requests[3], request(3, 4'314'580'000, 2, 2));  // 499 ns rounds down
}

TEST(RequestTraceV2, WriterRefusesLengthOnlyTracesAndLeavesNothing) {
  TempDir dir;
  VectorSource source({request(0, std::nullopt, 3, 4)}, {0, false, "vidur"});
  const std::string data = dir.path("out.csv");
  EXPECT_EQ(error_of([&] { write_tracev2_request_trace(source, data); }),
            data +
                ": arrival_time_us: expected requests with arrival times (every TraceV2 row has "
                "one), found a vidur trace without them");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path("")));
}

}  // namespace
}  // namespace exitsim::traces
