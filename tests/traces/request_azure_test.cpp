#include <gtest/gtest.h>

#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;

const std::string k_header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

TEST(RequestAzure, ReadsRowsRelativeToTheFirstTimestamp) {
  TempDir dir;
  const auto path = dir.write("a.csv", k_header +
                                           "2023-11-16 18:15:46.6805900,374,44\n"
                                           "2023-11-16 18:15:50.9951690,396,109\n"
                                           "2023-11-16 18:15:50.9951690,1,1\n");
  const auto result = read_all(path);
  EXPECT_EQ(result.format, "azure");
  EXPECT_TRUE(result.has_arrivals);
  EXPECT_EQ(result.skipped, 0);
  ASSERT_EQ(result.requests.size(), 3U);
  EXPECT_EQ(result.requests[0], request(0, 0, 374, 44));
  EXPECT_EQ(result.requests[1], request(1, 4'314'579'000, 396, 109));
  EXPECT_EQ(result.requests[2], request(2, 4'314'579'000, 1, 1));
}

TEST(RequestAzure, AcceptsBomCrlfAndNoTrailingNewline) {
  TempDir dir;
  const auto path = dir.write("a.csv",
                              "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                              "2023-11-16 18:15:46.6805900,374,44\r\n"
                              "2023-11-16 18:15:47,5,6");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::azure);
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1], request(1, 319'410'000, 5, 6));
}

TEST(RequestAzure, ConvertsCivilDatesAcrossMonthsYearsAndLeapDays) {
  TempDir dir;
  const auto path = dir.write("a.csv", k_header +
                                           "1900-02-28 00:00:00,1,1\n"
                                           "1900-03-01 00:00:00,1,1\n"  // 1900: not a leap year
                                           "2000-02-28 23:59:59.999999999,1,1\n"
                                           "2000-03-01 00:00:00.5,1,1\n"  // 2000: a leap year
                                           "2024-01-01 00:00:00,1,1\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 5U);
  constexpr TimeNs day = 86'400 * k_ns_per_s;
  EXPECT_EQ(*result.requests[1].arrival, day);
  // 1900-03-01 to 2000-03-01: 100 years holding 25 leap days (1904 .. 2000).
  const TimeNs century = (36'500 + 25) * day;
  EXPECT_EQ(*result.requests[2].arrival, century - 1);
  EXPECT_EQ(*result.requests[3].arrival, day + century + k_ns_per_s / 2);
  // 2000-03-01 to 2024-01-01: 8706 days (24 years less Jan and Feb 2000).
  EXPECT_EQ(*result.requests[4].arrival, day + century + 8'706 * day);
}

TEST(RequestAzure, MalformedRowsNameFileLineColumnAndField) {
  TempDir dir;
  const auto check = [&](const std::string& row, const std::string& expected) {
    const auto path = dir.write("bad.csv", k_header + "2023-11-16 18:15:46.6805900,374,44\n" + row);
    EXPECT_EQ(error_of(path), path + ":3:" + expected) << row;
  };
  check("2023-11-16 18:15:47.0,374\n", "26: GeneratedTokens: expected 3 fields, found 2");
  check("2023-11-16 18:15:47.0,374,44,9\n", "30: expected 3 fields, found 4");
  check("2023-11-16 18:15:47.0,abc,44\n",
        "23: ContextTokens: expected an integer token count, found \"abc\"");
  check("2023-11-16 18:15:47.0,12.5,44\n",
        "23: ContextTokens: expected an integer token count, found \"12.5\"");
  check("2023-11-16 18:15:47.0,,44\n",
        "23: ContextTokens: expected an integer token count, found an empty field");
  check("2023-11-16 18:15:47.0,374,0\n",
        "27: GeneratedTokens: expected a token count of at least 1, found 0");
  check("2023-11-16 18:15:47.0,-5,1\n",
        "23: ContextTokens: expected a token count of at least 1, found -5");
  check("2023-11-16 18:15:47.0,2147483649,1\n",
        "23: ContextTokens: expected a token count of at most 2147483648, found 2147483649");
  check("2023-11-16 18:15:47.0,99999999999999999999999,1\n",
        "23: ContextTokens: expected a token count of at most 2147483648, found "
        "99999999999999999999999");
  check("2023-11-16 18:15:45.0,374,44\n",
        "1: TIMESTAMP: expected a time at or after the previous request's "
        "\"2023-11-16 18:15:46.6805900\", found \"2023-11-16 18:15:45.0\"");
  check("2023-02-29 18:15:47.0,374,44\n",
        "1: TIMESTAMP: expected a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found "
        "\"2023-02-29 18:15:47.0\"");
  check("2023-11-16T18:15:47,374,44\n",
        "1: TIMESTAMP: expected a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found "
        "\"2023-11-16T18:15:47\"");
  check("2023-11-16 18:15:47.0123456789,374,44\n",
        "1: TIMESTAMP: expected a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found "
        "\"2023-11-16 18:15:47.0123456789\"");
  check("2023-11-16 18:15:47.,374,44\n",
        "1: TIMESTAMP: expected a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found "
        "\"2023-11-16 18:15:47.\"");
  check("2400-01-01 00:00:00,374,44\n",
        "1: TIMESTAMP: expected a time within 2^62 ns (about 146 years) of the first request's, "
        "found "
        "\"2400-01-01 00:00:00\"");
}

TEST(RequestAzure, UtcOffsetsOfThe2024TracesAreConvertedToUtc) {
  TempDir dir;
  // One second apart in UTC, each written in another zone; -07:00 falls on the day before.
  const auto path = dir.write("a.csv", k_header +
                                           "2024-05-10 00:00:00.009930+00:00,1,1\n"
                                           "2024-05-10 05:30:01+05:30,2,1\n"
                                           "2024-05-09 17:00:02-07:00,3,1\n"
                                           "2024-05-10 00:00:03Z,4,1\n");
  EXPECT_EQ(detect_request_trace_format(path), RequestTraceFormat::azure);
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 4U);
  EXPECT_EQ(result.requests[0], request(0, 0, 1, 1));
  EXPECT_EQ(result.requests[1], request(1, 990'070'000, 2, 1));
  EXPECT_EQ(result.requests[2], request(2, 1'990'070'000, 3, 1));
  EXPECT_EQ(result.requests[3], request(3, 2'990'070'000, 4, 1));
}

TEST(RequestAzure, OrderIsCheckedInUtcNotInLocalTime) {
  TempDir dir;
  // 06:00 +05:30 is 00:30 UTC: later on the clock face, a minute earlier in fact.
  const auto path = dir.write("a.csv", k_header +
                                           "2024-05-10 00:31:00+00:00,1,1\n"
                                           "2024-05-10 06:00:00+05:30,1,1\n");
  EXPECT_EQ(error_of(path), path +
                                ":3:1: TIMESTAMP: expected a time at or after the previous "
                                "request's \"2024-05-10 00:31:00+00:00\", found "
                                "\"2024-05-10 06:00:00+05:30\"");
}

TEST(RequestAzure, MalformedOffsetsAndMixedZonesAreRefused) {
  TempDir dir;
  const auto check = [&](const std::string& first, const std::string& row,
                         const std::string& expected) {
    const auto path = dir.write("bad.csv", k_header + first + ",1,1\n" + row + ",1,1\n");
    EXPECT_EQ(error_of(path), path + ":3:1: TIMESTAMP: expected " + expected) << row;
  };
  const std::string shape = "a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found ";
  const std::string utc = "2024-05-10 00:00:00+00:00";
  check(utc, "2024-05-10 00:00:01+24:00", shape + "\"2024-05-10 00:00:01+24:00\"");
  check(utc, "2024-05-10 00:00:01+05:60", shape + "\"2024-05-10 00:00:01+05:60\"");
  check(utc, "2024-05-10 00:00:01+0530", shape + "\"2024-05-10 00:00:01+0530\"");
  check(utc, "2024-05-10 00:00:01+5:30", shape + "\"2024-05-10 00:00:01+5:30\"");
  check(utc, "2024-05-10 00:00:01z", shape + "\"2024-05-10 00:00:01z\"");
  check(utc, "2024-05-10 00:00:01.+00:00", shape + "\"2024-05-10 00:00:01.+00:00\"");
  check(utc, "2024-05-10 00:00:01 +00:00", shape + "\"2024-05-10 00:00:01 +00:00\"");
  check(utc, "2024-05-10 00:00:01",
        "a time with a UTC offset, as the first row's, found \"2024-05-10 00:00:01\"");
  check("2024-05-10 00:00:00", "2024-05-10 00:00:01Z",
        "a time without a UTC offset, as the first row's, found \"2024-05-10 00:00:01Z\"");
}

TEST(RequestAzure, RowsAreReadOneAtATime) {
  TempDir dir;
  // A week-long trace is millions of rows: the reader must hand out the first before it reads
  // the rest, so a broken last row is met only when reached.
  const auto path = dir.write("a.csv", k_header +
                                           "2024-05-10 00:00:00.009930+00:00,7,8\n"
                                           "2024-05-10 00:00:01+00:00,x,1\n");
  auto source = open_request_trace(path);
  const auto first = source->next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, request(0, 0, 7, 8));
  EXPECT_EQ(error_of([&] { source->next(); }),
            path + ":3:27: ContextTokens: expected an integer token count, found \"x\"");
}

TEST(RequestAzure, ArrivalsReachTheDocumentedMaximumAndNoFurther) {
  TempDir dir;
  // 1970-01-01 plus 2^62 ns (k_max_arrival_ns) is 2116-02-20 23:53:38.427387904; Azure times
  // have 100 ns steps.
  const auto path = dir.write("a.csv", k_header +
                                           "1970-01-01 00:00:00,1,1\n"
                                           "2116-02-20 23:53:38.4273879,1,1\n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1].arrival, 4'611'686'018'427'387'900);
  const auto past = dir.write("p.csv", k_header +
                                           "1970-01-01 00:00:00,1,1\n"
                                           "2116-02-20 23:53:38.4273880,1,1\n");
  EXPECT_EQ(error_of(past), past +
                                ":3:1: TIMESTAMP: expected a time within 2^62 ns (about 146 "
                                "years) of the first request's, found \"2116-02-20 "
                                "23:53:38.4273880\"");
}

TEST(RequestAzure, SkipBadRowsCountsAndContinues) {
  TempDir dir;
  const auto path = dir.write("a.csv", k_header +
                                           "2023-11-16 18:00:10,10,1\n"
                                           "2023-11-16 18:00:09,11,1\n"  // backwards
                                           "2023-11-16 18:00:11,x,1\n"
                                           "2023-11-16 18:00:12,12,1,1\n"
                                           "2023-11-16 18:00:13,13,1\n");
  const auto result = read_all(path, RequestTraceOptions{std::nullopt, true});
  EXPECT_EQ(result.skipped, 3);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, 0, 10, 1));
  EXPECT_EQ(result.requests[1], request(1, 3 * k_ns_per_s, 13, 1));
}

TEST(RequestAzure, SkipBadRowsStillRequiresOneRequest) {
  TempDir dir;
  const auto path = dir.write("a.csv", k_header + "x,1,1\ny,1,1\n");
  EXPECT_EQ(error_of(path, RequestTraceOptions{std::nullopt, true}),
            path + ": expected at least one request, found none (2 rows skipped)");
}

TEST(RequestAzure, ForcedFormatChecksTheHeader) {
  TempDir dir;
  const auto path = dir.write("a.csv", "num_prefill_tokens,num_decode_tokens\n1,1\n");
  EXPECT_EQ(error_of(path, RequestTraceOptions{RequestTraceFormat::azure, false}),
            path +
                ":1:1: expected the azure header \"TIMESTAMP,ContextTokens,GeneratedTokens\", "
                "found \"num_prefill_tokens,num_decode_tokens\"");
}

TEST(RequestTraceOpen, MissingFileEmptyFileHeaderOnlyAndUnknownHeader) {
  TempDir dir;
  const auto missing = dir.path("missing.csv");
  EXPECT_EQ(error_of(missing), missing + ": cannot open request trace: No such file or directory");
  const auto directory = dir.path("sub");
  std::filesystem::create_directory(directory);
  EXPECT_EQ(error_of(directory), directory + ": cannot open request trace: Is a directory");

  const auto empty = dir.write("empty.csv", "");
  EXPECT_EQ(error_of(empty),
            empty +
                ":1:1: expected a request-trace header (one of azure, vidur, mooncake, burstgpt, "
                "native, tracev2, sharegpt), found an empty file");
  EXPECT_EQ(error_of(empty, RequestTraceOptions{RequestTraceFormat::azure, false}),
            empty +
                ":1:1: expected the azure header \"TIMESTAMP,ContextTokens,GeneratedTokens\", "
                "found an empty file");

  const auto header_only = dir.write("header.csv", k_header);
  EXPECT_EQ(error_of(header_only), header_only + ": expected at least one request, found none");

  const auto unknown =
      dir.write("unknown.csv",
                "time,prompt_tokens,completion_tokens,a_rather_long_column_name_that_goes_on\n1\n");
  EXPECT_EQ(error_of(unknown),
            unknown +
                ":1:1: expected a request-trace header (one of azure, vidur, mooncake, burstgpt, "
                "native, tracev2, sharegpt), found "
                "\"time,prompt_tokens,completion_tokens,a_rather_long_column_na\"");
}

TEST(RequestTraceOpen, FormatNamesRoundTrip) {
  const auto names = request_trace_format_names();
  ASSERT_EQ(names.size(), 8U);
  for (const auto& name : names) {
    const auto format = parse_request_trace_format(name);
    ASSERT_TRUE(format.has_value()) << name;
    EXPECT_EQ(to_string(*format), name);
  }
  EXPECT_FALSE(parse_request_trace_format("Azure").has_value());
}

TEST(RequestTraceOpen, BlankLinesAreIgnored) {
  TempDir dir;
  const auto path = dir.write("a.csv", k_header + "\n2023-11-16 18:00:10,10,1\r\n\r\n  \n");
  const auto result = read_all(path);
  ASSERT_EQ(result.requests.size(), 1U);
  EXPECT_EQ(result.skipped, 0);
}

}  // namespace
}  // namespace exitsim::traces
