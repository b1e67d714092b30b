// The bad-input matrix of issue 19 (tests/cli/bad_input_matrix_test.cpp) for the request-trace
// variants added since: Vidur arrival traces, Azure 2024 times with UTC offsets, BLIS TraceV2
// data files and generic CSVs read through a column mapping. Each break is refused with one line
// naming the file, the expectation and what was found; a UTF-8 BOM and CRLF line ends are read.
#include <gtest/gtest.h>

#include <functional>

#include "support/request_traces.hpp"

namespace exitsim::traces {
namespace {

using test_support::error_of;
using test_support::k_no_error;
using test_support::read_all;
using test_support::TempDir;

struct Variant {
  std::string name;
  std::string header;
  // One row from its time text (in the variant's unit) and its two token texts.
  std::function<std::string(const std::string&, const std::string&, const std::string&)> row;
  RequestTraceOptions options;
  bool has_time = true;
};

RequestTraceOptions csv_options(std::string arrival, std::string unit) {
  RequestTraceOptions options;
  options.format = RequestTraceFormat::csv;
  options.columns = CsvColumnMapping{std::move(arrival), "prompt", "completion", std::move(unit),
                                     "workload.trace.columns"};
  return options;
}

std::vector<Variant> variants() {
  return {
      {"vidur arrivals",
       "arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens\n",
       [](const std::string& t, const std::string& in, const std::string& out) {
         return t + "," + in + "," + out + ",1\n";
       },
       {}},
      {"azure 2024",
       "TIMESTAMP,ContextTokens,GeneratedTokens\n",
       [](const std::string& t, const std::string& in, const std::string& out) {
         return "2024-05-10 00:00:" + t + ".009930+00:00," + in + "," + out + "\n";
       },
       {}},
      {"tracev2",
       "request_id,client_id,tenant_id,slo_class,session_id,round_index,prefix_group,"
       "prefix_length,streaming,input_tokens,output_tokens,text_tokens,image_tokens,audio_tokens,"
       "video_tokens,reason_ratio,model,deadline_us,server_input_tokens,arrival_time_us,"
       "send_time_us,first_chunk_time_us,last_chunk_time_us,num_chunks,status,error_message,"
       "finish_reason\n",
       [](const std::string& t, const std::string& in, const std::string& out) {
         return "0,,,,,0,,0,false," + in + "," + out + ",0,0,0,0,0,,0,0," + t + "000000," + t +
                "000000,0,0,0,ok,,\n";
       },
       {}},
      {"csv seconds", "arrival,prompt,completion,model\n",
       [](const std::string& t, const std::string& in, const std::string& out) {
         return t + "," + in + "," + out + ",llama\n";
       },
       csv_options("arrival", "s")},
      {"csv datetime", "arrival,prompt,completion\n",
       [](const std::string& t, const std::string& in, const std::string& out) {
         return "2024-05-10 05:30:" + t + "+05:30," + in + "," + out + "\n";
       },
       csv_options("arrival", "datetime")},
      {"csv without arrivals", "prompt,completion\n",
       [](const std::string&, const std::string& in, const std::string& out) {
         return in + "," + out + "\n";
       },
       csv_options("", "s"), /*has_time=*/false},
  };
}

std::string with_crlf(const std::string& text) {
  std::string crlf;
  for (const char c : text)
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return crlf;
}

struct Break {
  std::string name;
  std::string text;
};

std::vector<Break> breaks(const Variant& v) {
  const std::string first = v.row("46", "374", "44");
  const std::string good = v.header + first + v.row("50", "396", "109");
  const auto with_input = [&](const std::string& in) {
    return v.header + first + v.row("50", in, "109");
  };
  const std::string last = v.row("50", "396", "109");
  std::string wrong = v.header;
  wrong[0] = 'X';
  std::vector<Break> out = {
      {"empty", ""},
      {"header only", v.header},
      {"truncated", v.header + first + last.substr(0, last.size() / 2)},
      {"non-numeric", with_input("abc")},
      {"NaN", with_input("nan")},
      {"inf", with_input("inf")},
      {"overflow", with_input("99999999999999999999")},
      {"1e400", with_input("1e400")},
      {"embedded NUL", with_input(std::string("3\0"
                                              "9",
                                              3))},
      {"huge line", with_input(std::string(17 << 20, '7'))},
      {"wrong header", wrong + first},
  };
  if (v.has_time) {
    out.push_back({"backwards time", v.header + v.row("50", "374", "44") + v.row("46", "1", "1")});
  }
  return out;
}

TEST(RequestTraceBadInputMatrix, NewVariantsRefuseEveryBreakOnOneLineNamingTheFile) {
  TempDir dir;
  int refused = 0;
  for (const Variant& v : variants()) {
    for (const Break& b : breaks(v)) {
      SCOPED_TRACE(v.name + ": " + b.name);
      const std::string path = dir.write("trace.csv", b.text);
      const std::string error = error_of(path, v.options);
      ASSERT_NE(error, k_no_error);
      ++refused;
      EXPECT_EQ(error.find('\n'), std::string::npos) << error;
      EXPECT_EQ(error.rfind(path + ":", 0), 0U) << error;
      EXPECT_NE(error.find("expected"), std::string::npos) << error;
      EXPECT_NE(error.find("found"), std::string::npos) << error;
      EXPECT_LE(error.size(), 400U) << error;
    }
  }
  EXPECT_EQ(refused, 6 * 11 + 5);  // 11 breaks each, and backwards time for the five with times
}

TEST(RequestTraceBadInputMatrix, NewVariantsReadBomAndCrlf) {
  TempDir dir;
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    const std::string good = v.header + v.row("46", "374", "44") + v.row("50", "396", "109");
    for (const std::string& text : {"\xEF\xBB\xBF" + good, with_crlf(good)}) {
      const auto result = read_all(dir.write("trace.csv", text), v.options);
      ASSERT_EQ(result.requests.size(), 2U);
      EXPECT_EQ(result.requests[1].input_tokens, 396);
      EXPECT_EQ(result.requests[1].output_tokens, 109);
      if (v.has_time) {
        EXPECT_EQ(result.requests[1].arrival, 4 * k_ns_per_s);
      } else {
        EXPECT_FALSE(result.requests[1].arrival.has_value());
      }
    }
  }
}

}  // namespace
}  // namespace exitsim::traces
