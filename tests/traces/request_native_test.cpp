#include <gtest/gtest.h>

#include <filesystem>

#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/request_trace_writer.hpp"
#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;
using test_support::VectorSource;

const std::string k_preamble =
    "# exitsim-requests v1\nrequest_id,arrival_ns,input_tokens,output_tokens\n";

TEST(RequestNative, ReadsIdsArrivalsAndLengths) {
  TempDir dir;
  const auto path = dir.write("n.csv", k_preamble + "3,100,10,20\n7,250,11,21\n");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::native);
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "native");
  EXPECT_TRUE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(3, 0, 10, 20));
  EXPECT_EQ(result.requests[1], request(7, 150, 11, 21));
}

TEST(RequestNative, ArrivalsSpanTheDocumentedMaximumAndNoFurther) {
  TempDir dir;
  // docs/traces.md: after rebasing, the last arrival may be at most 2^62 ns.
  const auto path = dir.write("n.csv", k_preamble + "0,5,1,1\n1,4611686018427387909,1,1\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1].arrival, 4611686018427387904);
  const auto past = dir.write("p.csv", k_preamble + "0,5,1,1\n1,9223372036854775807,1,1\n");
  EXPECT_EQ(error_of(past), past +
                                ":4:3: arrival_ns: expected a time within 2^62 ns (about 146 "
                                "years) of the first request's, found \"9223372036854775807\"");
}

TEST(RequestNative, EmptyArrivalsMeanALengthOnlyTrace) {
  TempDir dir;
  const auto path = dir.write("n.csv", k_preamble + "0,,10,20\n1,,11,21\n");
  auto source = open_request_trace(path);
  // Known before the first next(): the reader looks one row ahead.
  EXPECT_FALSE(source->has_arrivals());
  EXPECT_EQ(*source->next(), request(0, std::nullopt, 10, 20));
  EXPECT_EQ(*source->next(), request(1, std::nullopt, 11, 21));
  EXPECT_FALSE(source->next().has_value());
}

TEST(RequestNative, MalformedRowsAndHeaders) {
  TempDir dir;
  const auto check = [&](const std::string& rows, const std::string& expected) {
    const auto path = dir.write("bad.csv", rows);
    EXPECT_EQ(error_of(path), path + expected) << rows;
  };
  check(k_preamble + "0,5,1,1\n1,,1,1\n",
        ":4:3: arrival_ns: expected an arrival time (the first request has one), found an empty "
        "field");
  check(k_preamble + "0,,1,1\n1,5,1,1\n",
        ":4:3: arrival_ns: expected an empty field (the first request has no arrival time), "
        "found \"5\"");
  check(k_preamble + "4,5,1,1\n4,6,1,1\n",
        ":4:1: request_id: expected a request id above the previous request's 4, found 4");
  check(k_preamble + "0,5,1,1\n1,4,1,1\n",
        ":4:3: arrival_ns: expected a time at or after the previous request's \"5\", found \"4\"");
  check(k_preamble + "0,-5,1,1\n",
        ":3:3: arrival_ns: expected a non-negative integer number of nanoseconds, found \"-5\"");
  check(k_preamble + "0,9223372036854775808,1,1\n",
        ":3:3: arrival_ns: expected a non-negative integer number of nanoseconds, found "
        "\"9223372036854775808\"");
  check(k_preamble + "x,5,1,1\n",
        ":3:1: request_id: expected a non-negative integer request id, found \"x\"");
  check(k_preamble + "0,5,1\n", ":3:6: output_tokens: expected 4 fields, found 3");
  check(k_preamble, ": expected at least one request, found none");
  check("# exitsim-requests v2\n",
        ":1:1: expected \"# exitsim-requests v1\", found \"# exitsim-requests v2\"");
  const std::string headers =
      ":2:1: expected the native header \"request_id,arrival_ns,input_tokens,output_tokens\" or "
      "\"request_id,arrival_ns,input_tokens,output_tokens,prefix_block_tokens,prefix_hashes\", ";
  check("# exitsim-requests v1\n", headers + "found the end of the file");
  check("# exitsim-requests v1\nid,arrival,in,out\n", headers + "found \"id,arrival,in,out\"");
  const std::string prefixed =
      "# exitsim-requests v1\nrequest_id,arrival_ns,input_tokens,output_tokens"
      ",prefix_block_tokens,prefix_hashes\n";
  check(prefixed + "0,5,1,1,512,\n",
        ":3:13: prefix_hashes: expected at least one hash with a prefix_block_tokens, found none");
  check(prefixed + "0,5,1,1,,3 4\n",
        ":3:9: prefix_block_tokens: expected a block size from 1 to 1048576 tokens for the "
        "hashes, found an empty field");
  check(prefixed + "0,5,1,1,512,3  4\n",
        ":3:13: prefix_hashes: expected non-negative integer hashes separated by single spaces, "
        "found \"3  4\"");
  check(prefixed + "0,5,1,1,512,3 -4\n",
        ":3:13: prefix_hashes: expected non-negative integer hashes separated by single spaces, "
        "found \"3 -4\"");
}

// Prefix blocks (prefix caching) round-trip: a file whose first request names them has the two
// columns, requests without them leave both empty; a file without the columns refuses a later
// request that names them rather than drop its hashes.
TEST(RequestNative, RoundTripsPrefixHashes) {
  TempDir dir;
  std::vector<RequestDescriptor> requests = {request(0, 0, 1100, 4), request(1, 10, 30, 2),
                                             request(2, 20, 1024, 8)};
  requests[0].prefix_hashes = {0, 1};
  requests[0].prefix_block_tokens = 512;
  requests[2].prefix_hashes = {0, 18446744073709551615ULL};
  requests[2].prefix_block_tokens = 512;
  VectorSource source(requests);
  const auto path = dir.path("out.csv");
  EXPECT_EQ(write_native_request_trace(source, path), 3);
  EXPECT_EQ(read_all(path).requests, requests);

  const auto plain = dir.path("plain.csv");
  NativeRequestTraceWriter writer(plain);
  writer.write(requests[1]);
  EXPECT_EQ(error_of([&] { writer.write(requests[2]); }),
            plain +
                ": prefix_hashes: expected no prefix hashes, like the first request (its file "
                "has no such column), found 2 hashes");
}

// Mooncake rows may name prefix blocks from any row on: converting such a trace whose first row
// names none keeps the later rows' hashes (the columns follow the source, not the first row).
TEST(RequestNative, ConvertsAMooncakeTraceWhoseFirstRowHasNoHashes) {
  TempDir dir;
  const auto path = dir.write(
      "m.jsonl",
      "{\"timestamp\": 0, \"input_length\": 400, \"output_length\": 6}\n"
      "{\"timestamp\": 27, \"input_length\": 366, \"output_length\": 5, \"hash_ids\": [0, 2]}\n");
  auto source = open_request_trace(path);
  EXPECT_TRUE(source->may_carry_prefix_hashes());
  const auto native = dir.path("native.csv");
  EXPECT_EQ(write_native_request_trace(*source, native), 2);
  const auto copy = read_all(native);
  ASSERT_EQ(copy.requests.size(), 2U);
  EXPECT_TRUE(copy.requests[0].prefix_hashes.empty());
  EXPECT_EQ(copy.requests[1].prefix_hashes, (std::vector<std::uint64_t>{0, 2}));
  EXPECT_EQ(copy.requests[1].prefix_block_tokens, 512);
  EXPECT_EQ(copy.requests, read_all(path).requests);
}

TEST(RequestNative, RoundTripsWithArrivals) {
  TempDir dir;
  const std::vector<RequestDescriptor> requests = {request(0, 0, 374, 44),
                                                   request(1, 4'314'579'000, 396, 109),
                                                   request(5, 4'314'579'000, 1, 2'147'483'648)};
  VectorSource source(requests);
  const auto path = dir.path("out.csv");
  EXPECT_EQ(write_native_request_trace(source, path), 3);
  EXPECT_FALSE(std::filesystem::exists(detail::AtomicOutputFile::temp_path_for(path)));
  EXPECT_EQ(read_all(path).requests, requests);
}

TEST(RequestNative, RoundTripsWithoutArrivals) {
  TempDir dir;
  const std::vector<RequestDescriptor> requests = {request(0, std::nullopt, 3772, 54),
                                                   request(1, std::nullopt, 2015, 156)};
  VectorSource source(requests);
  const auto path = dir.path("out.csv");
  write_native_request_trace(source, path);
  const auto result = read_all(path);
  EXPECT_FALSE(result.has_arrivals);
  EXPECT_EQ(result.requests, requests);
}

TEST(RequestNative, FailedWriteLeavesNoFile) {
  TempDir dir;
  const auto path = dir.path("out.csv");
  {
    NativeRequestTraceWriter writer(path);
    writer.write(request(0, 10, 1, 1));
    EXPECT_TRUE(std::filesystem::exists(detail::AtomicOutputFile::temp_path_for(path)));
    EXPECT_EQ(error_of([&] { writer.write(request(1, std::nullopt, 1, 1)); }),
              path + ": arrival_ns: expected an arrival time, like the first request, found none");
  }
  EXPECT_FALSE(std::filesystem::exists(detail::AtomicOutputFile::temp_path_for(path)));
  EXPECT_FALSE(std::filesystem::exists(path));

  NativeRequestTraceWriter empty(path);
  EXPECT_EQ(error_of([&] { empty.commit(); }),
            path + ": expected at least one request, found none");
}

TEST(RequestNative, UnwritableDirectoryIsAnInputError) {
  TempDir dir;
  const auto path = dir.path("no/such/dir/out.csv");
  EXPECT_EQ(error_of([&] { NativeRequestTraceWriter writer(path); }),
            detail::AtomicOutputFile::temp_path_for(path) +
                ": cannot write request trace: No such file or directory");
}

}  // namespace
}  // namespace exitsim::traces
