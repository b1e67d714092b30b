// The bad-input matrix of issue 19 for request traces: every format the reader detects, each
// way the review broke its input. A refused input ends in one line naming the file and exit 1,
// and `trace convert` leaves no output (nor a temporary file) behind; the variants the formats
// document as accepted (a UTF-8 BOM, CRLF line ends) convert.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;

struct Format {
  std::string name;
  std::string file;
  std::string header;  // "" when the format has none
  // One request: its index, arrival (in the format's unit), input and output token texts.
  std::function<std::string(int, const std::string&, const std::string&, const std::string&)> row;
  bool has_time = true;
};

std::vector<Format> formats() {
  return {
      {"azure", "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n",
       [](int, const std::string& t, const std::string& in, const std::string& out) {
         return "2023-11-16 18:15:" + t + ".0000000," + in + "," + out + "\n";
       }},
      {"burstgpt", "burst.csv",
       "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
       [](int, const std::string& t, const std::string& in, const std::string& out) {
         return t + ",ChatGPT," + in + "," + out + ",1,Conversation log\n";
       }},
      {"mooncake", "trace.jsonl", "",
       [](int, const std::string& t, const std::string& in, const std::string& out) {
         return "{\"timestamp\": " + t + ", \"input_length\": " + in +
                ", \"output_length\": " + out + "}\n";
       }},
      {"native", "native.csv",
       "# exitsim-requests v1\nrequest_id,arrival_ns,input_tokens,output_tokens\n",
       [](int id, const std::string& t, const std::string& in, const std::string& out) {
         return std::to_string(id) + "," + t + "," + in + "," + out + "\n";
       }},
      {"vidur", "vidur.csv", "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n",
       [](int, const std::string&, const std::string& in, const std::string& out) {
         return in + "," + out + ",1,1\n";
       },
       /*has_time=*/false},
  };
}

// `text` with CRLF line ends.
std::string with_crlf(const std::string& text) {
  std::string crlf;
  for (const char c : text)
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return crlf;
}

struct Variant {
  std::string category;
  bool accepted;
  std::string text;
};

std::vector<Variant> variants(const Format& f) {
  const std::string good = f.header + f.row(0, "46", "374", "44") + f.row(1, "50", "396", "109");
  const auto with_input = [&](const std::string& in) {
    return f.header + f.row(0, "46", "374", "44") + f.row(1, "50", in, "109");
  };
  std::vector<Variant> out = {
      {"empty", false, ""},
      // The last row cut in its middle, inside a required field.
      {"truncated", false,
       [&] {
         const std::string last = f.row(1, "50", "396", "109");
         return f.header + f.row(0, "46", "374", "44") + last.substr(0, last.size() / 2);
       }()},
      {"non-numeric", false, with_input("abc")},
      {"NaN", false, with_input("nan")},
      {"inf", false, with_input("inf")},
      {"overflow", false, with_input("99999999999999999999")},
      {"1e400", false, with_input("1e400")},
      {"embedded NUL", false,
       with_input(std::string("3\0"
                              "9",
                              3))},
      {"huge line", false, with_input(std::string(17 << 20, '7'))},
      {"BOM", true, "\xEF\xBB\xBF" + good},
      {"CRLF", true, with_crlf(good)},
  };
  if (!f.header.empty()) {
    out.push_back({"header only", false, f.header});
    // The column line's first name misspelled (every format needs its first column).
    std::string wrong = f.header;
    const std::size_t line = wrong.rfind('\n', wrong.size() - 2);
    wrong[line == std::string::npos ? 0 : line + 1] = 'X';
    out.push_back({"wrong header", false, wrong + f.row(0, "46", "374", "44")});
  } else {
    out.push_back({"not JSON", false, "timestamp,input_length,output_length\n0,1,2\n"});
  }
  if (f.has_time)
    out.push_back({"backwards time", false,
                   f.header + f.row(0, "50", "374", "44") + f.row(1, "46", "396", "109")});
  return out;
}

TEST_F(Cli, EveryRequestTraceFormatRefusesEveryBadInputOnOneLineAndLeavesNothing) {
  int refused = 0;
  for (const Format& f : formats()) {
    for (const Variant& v : variants(f)) {
      SCOPED_TRACE(f.name + ": " + v.category);
      const fs::path in = file(f.file, v.text);
      const fs::path out = dir_ / "out" / "converted.csv";
      fs::create_directories(out.parent_path());
      const Result r = run("trace convert '" + in.string() + "' --out '" + out.string() + "'");
      if (v.accepted) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(fs::exists(out));
      } else {
        ++refused;
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("exitsim: error: " + in.string() + ":", 0), 0U) << r.err;
        EXPECT_NE(r.err.find("expected"), std::string::npos) << r.err;
        EXPECT_LE(r.err.size(), 1100U);
        // Nothing converted, nothing temporary.
        EXPECT_TRUE(fs::is_empty(out.parent_path()));
      }
      fs::remove_all(out.parent_path());
    }
  }
  EXPECT_EQ(refused, 58);  // 5 formats x 9 breaks, + header breaks (9) and backwards time (4)
}

}  // namespace

namespace {

// The same breaks in the versioned CSV files exitsim writes and reads back: op traces (through
// `trace chrome`) and cost tables (through `simulate --out`).
struct VersionedFile {
  std::string name;
  std::string version;            // first line
  std::string header;             // column line
  std::vector<std::string> rows;  // valid rows
  std::string row_with;           // a valid row with "{}" where a number goes
  std::function<std::string(const fs::path& in, const fs::path& out)> command;
};

std::string with_value(const std::string& row, const std::string& value) {
  std::string out = row;
  out.replace(out.find("{}"), 2, value);
  return out;
}

TEST_F(Cli, VersionedCsvFilesRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const std::vector<VersionedFile> files = {
      {"op trace",
       "# exitsim-op-trace v1\n",
       "name,kind,device,stream,start_ns,duration_ns,batch_tokens,context_tokens,depth,recursion,"
       "step_id,correlation_id\n",
       {"embed,other,cpu,0,100,50,74,0,-1,0,1,1\n", "qkv_proj,gemm,cpu,0,200,80,74,10,0,0,1,2\n"},
       "mlp,gemm,cpu,0,300,{},74,10,0,0,1,3\n",
       [](const fs::path& in, const fs::path& out) {
         return "trace chrome '" + in.string() + "' --out '" + (out / "trace.json").string() + "'";
       }},
      {"cost table",
       "# exitsim-cost-table v1\n",
       "op,batch,time_us\n",
       {"layer,1,100\n", "layer,111,200\n", "lm_head,1,801\n", "embedding,1,839\n"},
       "layer,200,{}\n",
       [](const fs::path& in, const fs::path& out) {
         return "simulate --set workload.requests=10 --set cost_model.kind=table --set "
                "'cost_model.profile=" +
                in.string() + "' --out '" + out.string() + "'";
       }},
  };
  for (const VersionedFile& f : files) {
    std::string rows;
    for (const std::string& row : f.rows)
      rows += row;
    const std::string good = f.version + f.header + rows;
    const auto with = [&](const std::string& value) {
      return good + with_value(f.row_with, value);
    };
    const std::vector<Variant> cases = {
        {"empty", false, ""},
        {"version only", false, f.version},
        {"other version", false,
         "# exitsim-" + f.version.substr(10, f.version.size() - 13) + "v9\n" + f.header + rows},
        {"wrong header", false, f.version + "X" + f.header.substr(1) + rows},
        {"truncated", false, good + f.row_with.substr(0, f.row_with.find("{}"))},
        {"non-numeric", false, with("abc")},
        {"NaN", false, with("nan")},
        {"overflow", false, with("99999999999999999999")},
        {"embedded NUL", false,
         with(std::string("3\0"
                          "9",
                          3))},
        {"huge line", false, with(std::string(17 << 20, '7'))},
        {"valid", true, good},
        {"BOM", true, "\xEF\xBB\xBF" + good},
        {"CRLF", true, with_crlf(good)},
    };
    for (const Variant& v : cases) {
      SCOPED_TRACE(f.name + ": " + v.category);
      const fs::path in = file("input.csv", v.text);
      const fs::path out = dir_ / "out";
      fs::create_directories(out);
      const Result r = run(f.command(in, out));
      if (v.accepted) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
      } else {
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("exitsim: error: " + in.string() + ":", 0), 0U) << r.err;
        EXPECT_LE(r.err.size(), 1100U);
        EXPECT_TRUE(fs::is_empty(out)) << "output left behind";
      }
      fs::remove_all(out);
    }
  }
}

}  // namespace
