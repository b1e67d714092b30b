// The public traces in ../shared/traces: data nobody on this project wrote.
#include <gtest/gtest.h>

#include "exitsim/traces/request_trace_writer.hpp"
#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::read_all;
using test_support::request;
using test_support::shared_trace;
using test_support::TempDir;

TEST(RequestRealTraces, AzureConversation) {
  const std::string path = shared_trace("azure_llm_2023_conv.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::azure);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "azure");
  EXPECT_EQ(result.skipped, 0);
  ASSERT_EQ(result.requests.size(), 19'366U);
  EXPECT_EQ(result.requests[0], request(0, 0, 374, 44));
  // 18:15:50.9951690 - 18:15:46.6805900
  EXPECT_EQ(result.requests[1], request(1, 4'314'579'000, 396, 109));
  // Last row 2023-11-16 19:14:08.4025270: 58 min 21.7219370 s after the first.
  const RequestDescriptor& last = result.requests.back();
  EXPECT_EQ(last, request(19'365, 3'501'721'937'000, 197, 183));
  const TimeNs minute = 60 * k_ns_per_s;
  EXPECT_GE(*last.arrival, 57 * minute);
  EXPECT_LE(*last.arrival, 59 * minute);
}

TEST(RequestRealTraces, MooncakeSynthetic) {
  const std::string path = shared_trace("mooncake_synthetic.jsonl");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::mooncake);
  auto result = read_all(path);
  EXPECT_EQ(result.format, "mooncake");
  ASSERT_EQ(result.requests.size(), 3'993U);
  // Each prompt's 512-token blocks are named: 79 for the first's 40,160 tokens (78 whole ones
  // and the partial last), 0 to 78.
  ASSERT_EQ(result.requests[0].prefix_hashes.size(), 79U);
  EXPECT_EQ(result.requests[0].prefix_hashes.back(), 78U);
  EXPECT_EQ(result.requests[0].prefix_block_tokens, 512);
  for (RequestDescriptor& r : result.requests) {
    r.prefix_hashes.clear();
    r.prefix_block_tokens = 0;
  }
  EXPECT_EQ(result.requests[0], request(0, 0, 40160, 6));
  EXPECT_EQ(result.requests[1], request(1, 0, 36640, 4));
  EXPECT_EQ(result.requests[2], request(2, 40 * k_ns_per_ms, 23769, 3));
  EXPECT_EQ(result.requests.back().arrival, 1'022'025 * k_ns_per_ms);
}

TEST(RequestRealTraces, ArxivLengths) {
  const std::string path = shared_trace("arxiv_summarization_lengths.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::vidur);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "vidur");
  EXPECT_FALSE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 28'257U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 3772, 54));
  EXPECT_EQ(result.requests[1], request(1, std::nullopt, 2015, 156));
  EXPECT_EQ(result.requests.back(), request(28'256, std::nullopt, 3178, 313));
}

TEST(RequestRealTraces, AzureRoundTripsThroughTheNativeFormat) {
  const std::string path = shared_trace("azure_llm_2023_conv.csv");
  EXITSIM_SKIP_UNLESS_EXISTS(path);
  TempDir dir;
  const std::string native = dir.path("azure.native.csv");
  auto source = open_request_trace(path);
  EXPECT_EQ(write_native_request_trace(*source, native), 19'366);
  EXPECT_EQ(read_all(native).requests, read_all(path).requests);
}

}  // namespace
}  // namespace exitsim::traces
