#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;

TEST(RequestMooncake, ReadsIntegerAndFloatMilliseconds) {
  TempDir dir;
  const auto path = dir.write(
      "m.jsonl",
      "{\"timestamp\": 0, \"input_length\": 40160, \"output_length\": 6, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 40, \"input_length\": 23769, \"output_length\": 3, \"hash_ids\": []}\r\n"
      "{\"timestamp\": 40.5, \"input_length\": 1, \"output_length\": 2, \"extra\": \"ignored\"}");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::mooncake);
  auto result = read_all(path);
  EXPECT_EQ(result.format, "mooncake");
  EXPECT_TRUE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 3U);
  // hash_ids name the prompt's 512-token blocks (prefix caching); an empty list names none.
  EXPECT_EQ(result.requests[0].prefix_hashes, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(result.requests[0].prefix_block_tokens, 512);
  EXPECT_EQ(result.requests[1].prefix_block_tokens, 0);
  result.requests[0].prefix_hashes.clear();
  result.requests[0].prefix_block_tokens = 0;
  EXPECT_EQ(result.requests[0], request(0, 0, 40160, 6));
  EXPECT_EQ(result.requests[1], request(1, 40 * k_ns_per_ms, 23769, 3));
  EXPECT_EQ(result.requests[2], request(2, 40 * k_ns_per_ms + 500 * k_ns_per_us, 1, 2));
}

TEST(RequestMooncake, ArrivalsAreRelativeToTheFirstRow) {
  TempDir dir;
  const auto path = dir.write("m.jsonl",
                              "{\"timestamp\": 1000, \"input_length\": 1, \"output_length\": 1}\n"
                              "{\"timestamp\": 1500, \"input_length\": 1, \"output_length\": 1}\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0].arrival, 0);
  EXPECT_EQ(result.requests[1].arrival, 500 * k_ns_per_ms);
}

TEST(RequestMooncake, AcceptsTheDocumentedMaximumAndMinusZero) {
  TempDir dir;
  // docs/traces.md: 0 to 4611686018427 ms, the whole milliseconds within 2^62 ns.
  const auto path =
      dir.write("m.jsonl",
                "{\"timestamp\": -0, \"input_length\": 1, \"output_length\": 1}\n"
                "{\"timestamp\": 4611686018427, \"input_length\": 1, \"output_length\": 1}\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0].arrival, 0);
  EXPECT_EQ(result.requests[1].arrival, 4611686018427 * k_ns_per_ms);
  const auto past =
      dir.write("p.jsonl",
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
                "{\"timestamp\": 4611686018428, \"input_length\": 1, \"output_length\": 1}\n");
  EXPECT_EQ(error_of(past), past +
                                ":2: timestamp: expected a number of milliseconds from 0 to "
                                "4611686018427, found 4611686018428");
}

// A pipe can be read once: detection and reading share one open (docs/traces.md, "Pipes"), as
// `exitsim trace inspect <(printf ...)` needs.
TEST(RequestMooncake, ReadsFromAFifo) {
  TempDir dir;
  const std::string fifo = dir.path("trace.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens the FIFO
    out << "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5}\n"
           "{\"timestamp\": 2, \"input_length\": 6, \"output_length\": 7}\n";
  });
  const auto result = read_all(fifo);
  writer.join();
  EXPECT_EQ(result.format, "mooncake");
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1].arrival, 2 * k_ns_per_ms);
  EXPECT_EQ(result.requests[1].output_tokens, 7);
}

TEST(RequestMooncake, MalformedLines) {
  TempDir dir;
  const std::string good = "{\"timestamp\": 10, \"input_length\": 5, \"output_length\": 5}\n";
  const auto check = [&](const std::string& row, const std::string& expected) {
    const auto path = dir.write("bad.jsonl", good + row);
    EXPECT_EQ(error_of(path), path + ":2" + expected) << row;
  };
  check("{\"timestamp\": 11, \"input_length\": 5\n",
        ": expected a JSON object, found invalid JSON at byte 36");
  check("{\"timestamp\": 11, \"input_length\": 5, \"output_length\": 5} x\n",
        ": expected a JSON object, found invalid JSON at byte 58");
  check("[1, 2]\n", ":1: expected a JSON object, found an array");
  check("{\"timestamp\": 11, \"input_length\": 5}\n",
        ": output_length: expected a key \"output_length\", found none");
  check("{\"input_length\": 5, \"output_length\": 5}\n",
        ": timestamp: expected a key \"timestamp\", found none");
  check("{\"timestamp\": \"11\", \"input_length\": 5, \"output_length\": 5}\n",
        ": timestamp: expected a number of milliseconds from 0 to 4611686018427, found the string "
        "\"11\"");
  check("{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 5}\n",
        ": timestamp: expected a number of milliseconds from 0 to 4611686018427, found -1");
  check("{\"timestamp\": 1e300, \"input_length\": 5, \"output_length\": 5}\n",
        ": timestamp: expected a number of milliseconds from 0 to 4611686018427, found 1e+300");
  check("{\"timestamp\": 9.5, \"input_length\": 5, \"output_length\": 5}\n",
        ": timestamp: expected a time at or after the previous request's 10, found 9.5");
  check("{\"timestamp\": 11, \"input_length\": 5.0, \"output_length\": 5}\n",
        ": input_length: expected an integer token count, found the number 5.0");
  check("{\"timestamp\": 11, \"input_length\": null, \"output_length\": 5}\n",
        ": input_length: expected an integer token count, found null");
  check("{\"timestamp\": 11, \"input_length\": 5, \"output_length\": 0}\n",
        ": output_length: expected a token count of at least 1, found 0");
  check("{\"timestamp\": 11, \"input_length\": 18446744073709551615, \"output_length\": 5}\n",
        ": input_length: expected a token count of at most 2147483648, found "
        "18446744073709551615");
  check("{\"timestamp\": 11, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": 3}\n",
        ": hash_ids: expected an array of non-negative integers, found 3");
  check(
      "{\"timestamp\": 11, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": [1, \"a\"]}\n",
      ": hash_ids: expected an array of non-negative integers, found the string \"a\" at index 1");
  check("{\"timestamp\": 11, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": [1, -2]}\n",
        ": hash_ids: expected an array of non-negative integers, found -2 at index 1");
}

TEST(RequestMooncake, SkipBadRowsCountsMalformedJson) {
  TempDir dir;
  const auto path = dir.write("m.jsonl",
                              "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
                              "{\"timestamp\": 1, \"input_length\": 1, \"output_length\"\n"
                              "{\"timestamp\": 2, \"input_length\": \"1\", \"output_length\": 1}\n"
                              "{\"timestamp\": 3, \"input_length\": 2, \"output_length\": 2}\n");
  const auto result = read_all(path, RequestTraceOptions{std::nullopt, true});
  EXPECT_EQ(result.skipped, 2);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1], request(1, 3 * k_ns_per_ms, 2, 2));
}

}  // namespace
}  // namespace exitsim::traces
