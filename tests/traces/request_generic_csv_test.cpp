// Generic CSV request traces read through a column mapping (format csv).
#include <gtest/gtest.h>

#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::read_all;
using test_support::request;
using test_support::TempDir;

RequestTraceOptions mapped(std::string arrival, std::string unit = "s") {
  RequestTraceOptions options;
  options.format = RequestTraceFormat::csv;
  options.columns.arrival = std::move(arrival);
  options.columns.arrival_unit = std::move(unit);
  options.columns.input_tokens = "prompt";
  options.columns.output_tokens = "completion";
  return options;
}

TEST(RequestGenericCsv, ReadsMappedColumnsInAnyOrderAndIgnoresTheRest) {
  TempDir dir;
  const auto path = dir.write("g.csv",
                              "completion,model,t,prompt\n"
                              "44,llama,100.25,374\n"
                              "109,llama,101,396\n");
  const auto result = read_all(path, mapped("t"));
  EXPECT_EQ(result.format, "csv");
  EXPECT_TRUE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[0], request(0, 0, 374, 44));
  EXPECT_EQ(result.requests[1], request(1, 750'000'000, 396, 109));
}

TEST(RequestGenericCsv, EachArrivalUnitScalesExactly) {
  TempDir dir;
  const auto path = dir.write("g.csv", "t,prompt,completion\n0,1,1\n1500.5,1,1\n");
  const auto arrival = [&](const std::string& unit) {
    return *read_all(path, mapped("t", unit)).requests[1].arrival;
  };
  EXPECT_EQ(arrival("s"), 1'500'500'000'000);
  EXPECT_EQ(arrival("ms"), 1'500'500'000);
  EXPECT_EQ(arrival("us"), 1'500'500);
  // Half a nanosecond rounds up.
  EXPECT_EQ(arrival("ns"), 1'501);
}

TEST(RequestGenericCsv, DatetimeArrivalsTakeOffsets) {
  TempDir dir;
  const auto path = dir.write("g.csv",
                              "when,prompt,completion\n"
                              "2024-05-10 00:00:00+00:00,1,1\n"
                              "2024-05-10 02:00:00.5+02:00,1,1\n");
  const auto result = read_all(path, mapped("when", "datetime"));
  ASSERT_EQ(result.requests.size(), 2U);
  EXPECT_EQ(result.requests[1].arrival, 500'000'000);
}

TEST(RequestGenericCsv, WithoutAnArrivalColumnRowsCarryNoTimes) {
  TempDir dir;
  const auto path = dir.write("g.csv", "prompt,completion,t\n5,6,garbage\n");
  const auto result = read_all(path, mapped(""));
  EXPECT_FALSE(result.has_arrivals);
  ASSERT_EQ(result.requests.size(), 1U);
  EXPECT_EQ(result.requests[0], request(0, std::nullopt, 5, 6));
}

TEST(RequestGenericCsv, MappingErrorsNameLineOneAndTheKey) {
  TempDir dir;
  const auto path = dir.write("g.csv", "t,prompt_tokens,completion\n1,2,3\n");
  EXPECT_EQ(error_of(path, mapped("t")),
            path +
                ":1:1: workload.trace.columns.input_tokens: expected a column of the header "
                "(\"t\", \"prompt_tokens\", \"completion\"), found \"prompt\" (did you mean "
                "\"prompt_tokens\"?)");
  auto typo = mapped("tt");
  EXPECT_EQ(error_of(path, typo),
            path +
                ":1:1: workload.trace.columns.arrival: expected a column of the header (\"t\", "
                "\"prompt_tokens\", \"completion\"), found \"tt\" (did you mean \"t\"?)");
  auto unmapped = mapped("t");
  unmapped.columns.output_tokens = "";
  const auto both = dir.write("b.csv", "t,prompt,completion\n1,2,3\n");
  EXPECT_EQ(error_of(both, unmapped),
            both +
                ":1:1: workload.trace.columns.output_tokens: expected the name of the column "
                "holding output_tokens (format csv reads columns by name), found none");
  const auto twice = dir.write("d.csv", "t,prompt,completion,prompt\n1,2,3,4\n");
  EXPECT_EQ(error_of(twice, mapped("t")),
            twice +
                ":1:1: workload.trace.columns.input_tokens: expected a column named once in the "
                "header, found \"prompt\" as columns 2 and 4");
  EXPECT_EQ(error_of(both, mapped("t", "minutes")),
            both +
                ": workload.trace.columns.arrival_unit: expected one of s, ms, us, ns, datetime, "
                "found \"minutes\"");
}

TEST(RequestGenericCsv, TheDocumentedMappingErrorIsTheOneGiven) {
  TempDir dir;
  const auto path = dir.write("requests.csv", "ts,model,prompt_tokens,gen_len\n1,m,2,3\n");
  RequestTraceOptions options;
  options.format = RequestTraceFormat::csv;
  options.columns = CsvColumnMapping{"ts", "prompt", "gen_len", "ms", "workload.trace.columns"};
  EXPECT_EQ(error_of(path, options),
            path +
                ":1:1: workload.trace.columns.input_tokens: expected a column of the header "
                "(\"ts\", \"model\", \"prompt_tokens\", \"gen_len\"), found \"prompt\" (did you "
                "mean \"prompt_tokens\"?)");
}

TEST(RequestGenericCsv, IsNeverDetected) {
  TempDir dir;
  const auto path = dir.write("g.csv", "t,prompt,completion\n1,2,3\n");
  EXPECT_EQ(error_of(path),
            path +
                ":1:1: expected a request-trace header (one of azure, vidur, mooncake, burstgpt, "
                "native, tracev2, sharegpt), found \"t,prompt,completion\"");
}

TEST(RequestGenericCsv, MalformedRows) {
  TempDir dir;
  const auto check = [&](const std::string& unit, const std::string& row,
                         const std::string& expected) {
    const auto path = dir.write("bad.csv", "t,prompt,completion\n5,1,1\n" + row);
    EXPECT_EQ(error_of(path, mapped("t", unit)), path + ":3:" + expected) << row;
  };
  check("s", "4,1,1\n",
        "1: t: expected a time at or after the previous request's \"5\", found \"4\"");
  check("ms", "-6,1,1\n",
        "1: t: expected a non-negative decimal number of milliseconds, found \"-6\"");
  check("us", "inf,1,1\n",
        "1: t: expected a non-negative decimal number of microseconds, found \"inf\"");
  check("s", "6,0,1\n", "3: prompt: expected a token count of at least 1, found 0");
  check("s", "6,1\n", "4: completion: expected 3 fields, found 2");
  const auto numbers = dir.write("n.csv", "t,prompt,completion\n6,1,1\n");
  EXPECT_EQ(error_of(numbers, mapped("t", "datetime")),
            numbers +
                ":2:1: t: expected a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z], found "
                "\"6\"");
}

}  // namespace
}  // namespace exitsim::traces
