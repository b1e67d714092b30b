// The bad-input matrix of issue 19 for the other files exitsim reads (bad_input_matrix_test.cpp
// covers request traces, op traces and cost tables): scenarios, token traces, exit and quality
// tables, cost profiles, model configs and safetensors weights, each through a command that reads
// it and writes into an output folder. A refused file ends in exit 1 and one line that starts
// with the file's path and says what was expected (each case names a part of that line, its
// class), and the output folder stays empty: no output, no temporary file. What a format
// documents as accepted (a UTF-8 BOM, CRLF line ends, an empty scenario) runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "support/bad_file_matrix.hpp"

namespace {

using namespace cli_support;
using namespace bad_file_matrix;

// Scenario YAML, through `simulate FILE --out DIR`.
TEST_F(BadFileMatrix, ScenarioYamlRefusesEveryBadInputOnOneLineAndLeavesNothing) {
  const std::string good =
      "name: matrix\nseed: 1\nworkload:\n  requests: 10\n  arrivals:\n    rate: 4.0\n";
  const auto with_rate = [&](const std::string& rate) {
    return replaced(good, "rate: 4.0", "rate: " + rate);
  };
  const std::vector<Case> cases = {
      accepted("valid", good),
      // docs/scenario.md: "An empty file is the default scenario."
      accepted("empty", ""),
      accepted("BOM", k_bom + good),
      accepted("CRLF", with_crlf(good)),
      refused("not a mapping", "just a string\n",
              "expected a mapping of scenario sections (name: ..., model: ...), found \"just a "
              "string\""),
      refused("a list", "- a\n- b\n", "expected a mapping of scenario sections"),
      refused("truncated in a flow mapping",
              "name: matrix\nworkload: {requests: 10, arrivals: {rate: 4",
              "expected well-formed YAML, found a syntax error"),
      refused("truncated in a quoted string", "name: \"matr",
              "expected well-formed YAML, found a syntax error"),
      refused("truncated in a key", good.substr(0, good.find("rate") + 2),
              "workload.arrivals: expected a mapping, found \"ra\""),
      refused("non-numeric", with_rate("abc"),
              "workload.arrivals.rate: expected a number, found \"abc\""),
      refused("NaN", with_rate(".nan"), "expected a number, found \".nan\""),
      refused("inf", with_rate(".inf"), "expected a number, found \".inf\""),
      refused("-inf", with_rate("-.inf"), "expected a number, found \"-.inf\""),
      refused("1e400", with_rate("1e400"), "expected a number, found \"1e400\""),
      refused("integer overflow", replaced(good, "requests: 10", "requests: 99999999999999999999"),
              "workload.requests: expected an integer, found \"99999999999999999999\""),
      refused("embedded NUL", with_rate(k_nul_in_39), "expected YAML text, found a NUL byte"),
      refused("embedded NUL in quotes", "name: \"t" + std::string(1, '\0') + "\"\n",
              ":1:9: expected YAML text, found a NUL byte"),
      refused("leading NUL", std::string(1, '\0') + good,
              ":1:1: expected YAML text, found a NUL byte"),
      refused("huge", good + "# " + k_huge_number + "\n",
              "expected a scenario of at most 16 MiB, found a larger file"),
      refused("unknown key", replaced(good, "requests", "requestz"),
              "unknown key \"requestz\"; did you mean \"requests\"?"),
      refused("a list for a section", "name: matrix\nworkload: [1, 2]\n",
              "workload: expected a mapping, found a list"),
      refused("a list for a number", with_rate("[1, 2]"), "expected a number, found a list"),
  };
  const fs::path in = dir_ / "scenario.yaml";
  const int refusals = check(cases, in, [&](const fs::path& out) {
    return "simulate " + quoted(in) + " --out " + quoted(out);
  });
  EXPECT_EQ(refusals, 18);
}

// Hugging Face config.json files (model.hf_config), through `simulate --set model.hf_config=FILE
// --out DIR`: Mistral-7B's, which fits one H100, and the ways a download can go wrong.
TEST_F(BadFileMatrix, HuggingFaceConfigsRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  std::ifstream seed(std::string(EXITSIM_SOURCE_DIR) + "/fuzz/corpus/hf_config/mistral.json");
  const std::string good((std::istreambuf_iterator<char>(seed)), std::istreambuf_iterator<char>());
  ASSERT_NE(good.find("\"hidden_size\": 4096"), std::string::npos);
  const auto with_width = [&](const std::string& width) {
    return replaced(good, "\"hidden_size\": 4096", "\"hidden_size\": " + width);
  };
  const std::vector<Case> cases = {
      accepted("valid", good),
      accepted("BOM", k_bom + good),
      accepted("CRLF", with_crlf(good)),
      refused("not an object", "[1, 2]", "expected a JSON object, found [1,2]"),
      refused("truncated", good.substr(0, good.size() / 2),
              "expected valid JSON, found parse error"),
      refused("non-numeric", with_width("\"big\""),
              "hidden_size: expected an integer in [1, 1048576], found \"big\""),
      refused("negative", with_width("-4096"), "hidden_size: expected an integer in [1, 1048576]"),
      refused("integer overflow", with_width("99999999999999999999"),
              "hidden_size: expected an integer in [1, 1048576], found 1e+20"),
      refused("NaN", with_width("NaN"), "expected valid JSON, found parse error"),
      refused("unknown architecture",
              replaced(good, "\"model_type\": \"mistral\"", "\"model_type\": \"bert\""),
              "model_type: expected one of llama, qwen2, qwen3, qwen3_moe, mistral, mixtral, "
              "gemma, gemma2, gemma3, gemma3_text, deepseek_v2, deepseek_v3, llama4, "
              "llama4_text, gpt2, found \"bert\""),
      refused("duplicate key",
              replaced(good, "\"vocab_size\"", "\"vocab_size\": 5, \"vocab_size\""),
              "expected each key once per object, found the key \"vocab_size\" twice"),
      refused("embedded NUL", replaced(good, "4096", k_nul_in_39),
              "expected JSON text, found a NUL byte"),
      refused("huge", good + std::string(17 << 20, ' '), "expected at most 16777216 bytes, found"),
  };
  const fs::path in = dir_ / "config.json";
  const int refusals = check(cases, in, [&](const fs::path& out) {
    return "simulate --set model.hf_config=" + quoted(in) + " --set workload.requests=5 --out " +
           quoted(out);
  });
  EXPECT_EQ(refusals, 10);
}

// Token (exit) traces, replayed by `simulate` (exit_policy.kind replay, a model with four exit
// points and a strategy that lets tokens exit, so that the trace is read).
TEST_F(BadFileMatrix, TokenTracesRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const std::string version = "# exitsim-token-trace v1\n";
  const std::string header =
      "request_id,position,exit_depth,exit_point,score,policy,replica,time_ns\n";
  const auto row = [](const std::string& id, const std::string& exit_point,
                      const std::string& score, const std::string& time) {
    return id + ",2,8," + exit_point + "," + score + ",confidence,0," + time + "\n";
  };
  const std::string rows =
      "0,0,8,0,0.5,confidence,0,100\n0,1,16,1,,full_depth,0,200\n" + row("1", "0", "0.75", "300");
  const std::string good = version + header + rows;
  const auto with = [&](const std::string& id, const std::string& exit_point,
                        const std::string& score, const std::string& time) {
    return good + row(id, exit_point, score, time);
  };
  const std::vector<Case> cases = {
      accepted("valid", good),
      accepted("BOM", k_bom + good),
      accepted("CRLF", with_crlf(good)),
      // time_ns is what was measured, not a key: rows are looked up by request and position.
      accepted("times out of order", with("2", "1", "0.5", "50")),
      refused("empty", "", "version: expected \"# exitsim-token-trace v1\", found an empty file"),
      refused("version only", version, "header: expected the header row, found end of file"),
      refused("header only", version + header,
              "expected at least one token row to replay, found a header and no rows"),
      refused("other version", "# exitsim-token-trace v9\n" + header + rows,
              "(this build reads only v1)"),
      refused("wrong header", version + "X" + header + rows,
              "header: expected column \"request_id\", found \"Xrequest_id\""),
      refused("wrong schema (an op trace)",
              "# exitsim-op-trace v1\nname,kind,device,stream,start_ns,duration_ns,batch_tokens,"
              "context_tokens,depth,recursion,step_id,correlation_id\n"
              "embed,other,cpu,0,100,50,74,0,-1,0,1,1\n",
              "version: expected \"# exitsim-token-trace v1\", found \"# exitsim-op-trace v1\""),
      refused("truncated", good + "1,2,8,0,0.", "expected 8 fields, found 5"),
      refused("truncated in quotes", good + "1,2,8,0,0.5,\"confid",
              "expected a closing quote for this quoted field, found the end of the file"),
      refused("a quote in an unquoted field", good + "1,2,8,0,0.5,con\"f,0,400\n",
              "expected a quote only inside a quoted field"),
      refused("non-numeric", with("2", "abc", "0.5", "400"),
              "exit_point: expected a non-negative integer, found \"abc\""),
      refused("NaN", with("2", "1", "nan", "400"),
              "score: expected a finite number or an empty field, found \"nan\""),
      refused("inf", with("2", "1", "inf", "400"),
              "score: expected a finite number or an empty field, found \"inf\""),
      refused("1e400", with("2", "1", "1e400", "400"),
              "score: expected a finite number or an empty field, found \"1e400\""),
      refused("overflow", with("99999999999999999999", "1", "0.5", "400"),
              "request_id: expected a non-negative integer that fits in 64 bits"),
      refused("exit point overflow", with("2", "99999999999", "0.5", "400"),
              "exit_point: expected an integer <= 2147483647, found \"99999999999\""),
      // The model has four exit points; a token the workload never reaches is checked too.
      refused("exit point past the model's", with("5000", "4", "0.5", "400"),
              ":6: exit_point: expected an exit point index in [0, 3] (the model has 4 exit "
              "points), found 4"),
      refused("embedded NUL", with("2", "1", "0.5", k_nul_in_39),
              "time_ns: expected a non-negative integer, found \"3\\x009\""),
      refused("huge line", with("2", "1", "0.5", k_huge_number),
              "time_ns: expected a non-negative integer that fits in 64 bits, found \"7777"),
  };
  const fs::path in = dir_ / "tokens.csv";
  const int refusals = check(cases, in, [&](const fs::path& out) {
    return "simulate --set workload.requests=10 --set model.preset=layerskip-llama-2-7b --set "
           "exit_policy.kind=replay --set 'exit_policy.token_trace=" +
           in.string() + "' --set sync.strategy=state_copy --out " + quoted(out);
  });
  EXPECT_EQ(refusals, 18);
}

// The simulator's measured exit distributions: an exit table and a quality table, read through
// exit_policy.threshold_table by `simulate` on the three-exit-point MoR example.
TEST_F(BadFileMatrix, ExitAndQualityTablesRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const fs::path in = dir_ / "table.csv";
  const auto command = [&](const fs::path& out) {
    return "simulate scenarios/examples/mor_depth.yaml --set workload.requests=10 --set "
           "exit_policy.kind=confidence --set exit_policy.threshold=0.7 --set "
           "'exit_policy.threshold_table=" +
           in.string() + "' --out " + quoted(out);
  };

  const std::string exit_version = "# exitsim-exit-table v1\n";
  const std::string exit_header = "threshold,p_exit_1,p_exit_2,p_exit_3\n";
  const std::string exit_rows = "0.5,0.55,0.30,0.15\n0.9,0.20,0.30,0.50\n";
  const std::string exit_good = exit_version + exit_header + exit_rows;
  const auto exit_row = [&](const std::string& threshold, const std::string& p_exit_1) {
    return exit_good + threshold + "," + p_exit_1 + ",0.3,0.5\n";
  };
  const std::vector<Case> exit_cases = {
      accepted("exit table: valid", exit_good),
      accepted("exit table: BOM", k_bom + exit_good),
      accepted("exit table: CRLF", with_crlf(exit_good)),
      refused("exit table: empty", "",
              "version: expected \"# exitsim-exit-table v1\", found an empty file"),
      refused("exit table: version only", exit_version,
              "header: expected the header row, found end of file"),
      refused("exit table: header only", exit_version + exit_header,
              "row: expected at least one threshold row, found end of file"),
      refused("exit table: other version", "# exitsim-exit-table v9\n" + exit_header + exit_rows,
              "version: expected \"# exitsim-exit-table v1\", found \"# exitsim-exit-table v9\""),
      refused("exit table: wrong header", exit_version + "X" + exit_header + exit_rows,
              "header: expected column \"threshold\", found \"Xthreshold\""),
      refused("exit table: wrong schema (two exit points)",
              exit_version + "threshold,p_exit_1,p_exit_2\n0.5,0.5,0.5\n",
              "expected 3 exit points (the model's), found 2"),
      refused("exit table: truncated", exit_good + "0.95,0.1,", "row: expected 4 fields, found 3"),
      refused("exit table: non-numeric", exit_row("0.95", "abc"),
              "p_exit_1: expected a probability in [0, 1], found \"abc\""),
      refused("exit table: NaN", exit_row("0.95", "nan"),
              "p_exit_1: expected a probability in [0, 1], found \"nan\""),
      refused("exit table: inf", exit_row("inf", "0.2"),
              "threshold: expected a finite number, found \"inf\""),
      refused("exit table: 1e400", exit_row("1e400", "0.2"),
              "threshold: expected a finite number, found \"1e400\""),
      refused("exit table: overflow", exit_row("0.95", "99999999999999999999"),
              "p_exit_1: expected a probability in [0, 1], found 1e+20"),
      refused("exit table: backwards threshold", exit_row("0.8", "0.2"),
              "threshold: expected a threshold above 0.9 (the previous row's), found 0.8"),
      refused("exit table: embedded NUL", exit_row("0.95", k_nul_in_39),
              "p_exit_1: expected a probability in [0, 1], found \"3\\x009\""),
      refused("exit table: huge line", exit_row("0.95", k_huge_number),
              "p_exit_1: expected a probability in [0, 1]"),
  };
  EXPECT_EQ(check(exit_cases, in, command), 15);

  const std::string quality_version = "# exitsim-quality-table v2\n";
  const std::string quality_header =
      "policy,strategy,measure,threshold,capacities,tokens,nll_per_token,top1_agreement,"
      "mean_exit_depth,p_exit_1,p_exit_2,p_exit_3\n";
  const std::string quality_rows =
      "full_depth,full_depth,,,,40000,1.2345,1,31,0,0,1\n"
      "confidence,skip_kv,top1,0.5,,40000,1.31,0.982,18.2,0.55,0.3,0.15\n"
      "confidence,skip_kv,top1,0.9,,40000,1.25,0.9997,26,0.2,0.3,0.5\n";
  const std::string quality_good = quality_version + quality_header + quality_rows;
  const auto quality_row = [&](const std::string& threshold, const std::string& tokens,
                               const std::string& nll) {
    return quality_good + "confidence,skip_kv,top1," + threshold + ",," + tokens + "," + nll +
           ",0.99,27,0.1,0.3,0.6\n";
  };
  const std::vector<Case> quality_cases = {
      accepted("quality table: valid", quality_good),
      accepted("quality table: BOM", k_bom + quality_good),
      accepted("quality table: CRLF", with_crlf(quality_good)),
      refused("quality table: empty", "", "version: expected"),
      refused("quality table: version only", quality_version,
              "header: expected the header row, found end of file"),
      refused("quality table: header only", quality_version + quality_header,
              "row: expected at least one setting row, found end of file"),
      refused("quality table: version 1",
              "# exitsim-quality-table v1\n" + quality_header + quality_rows,
              "version: expected \"# exitsim-quality-table v2\", found \"# "
              "exitsim-quality-table v1\""),
      refused("quality table: wrong header", quality_version + "X" + quality_header + quality_rows,
              "header: expected column \"policy\", found \"Xpolicy\""),
      refused("quality table: wrong schema (an exit table's header)",
              quality_version + exit_header + exit_rows, "header: expected column \"policy\""),
      refused("quality table: truncated", quality_good + "confidence,skip_kv,top1,0.95,,400",
              "row: expected 12 fields, found 6"),
      refused("quality table: non-numeric", quality_row("0.95", "abc", "1.2"),
              "tokens: expected a token count of at least 1, found \"abc\""),
      refused("quality table: NaN", quality_row("0.95", "400", "nan"),
              "nll_per_token: expected a non-negative number of nats, found \"nan\""),
      refused("quality table: inf", quality_row("0.95", "400", "inf"),
              "nll_per_token: expected a non-negative number of nats, found \"inf\""),
      refused("quality table: 1e400", quality_row("0.95", "400", "1e400"),
              "nll_per_token: expected a non-negative number of nats, found \"1e400\""),
      refused("quality table: overflow", quality_row("0.95", "99999999999999999999", "1.2"),
              "tokens: expected a token count of at least 1, found \"99999999999999999999\""),
      refused("quality table: backwards threshold", quality_row("0.8", "400", "1.2"),
              "threshold: expected a threshold above 0.9 (the previous confidence top1 row's "
              "under skip_kv), found 0.8"),
      refused("quality table: embedded NUL", quality_row("0.95", "400", k_nul_in_39),
              "nll_per_token: expected a non-negative number of nats, found \"3\\x009\""),
      refused("quality table: huge line", quality_row("0.95", "400", k_huge_number),
              "nll_per_token: expected a non-negative number of nats"),
  };
  EXPECT_EQ(check(quality_cases, in, command), 15);
}

// A calibrated cost profile (JSON) that `simulate` prices with (cost_model.kind calibrated). The
// valid one fits every op that the default scenario's llama-3-8b on an h100-sxm needs.
TEST_F(BadFileMatrix, CostProfilesRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  std::string ops;
  for (const char* name :
       {"attn_norm", "qkv_proj", "rotary", "kv_write", "attention", "o_proj", "mlp_norm",
        "mlp.gate_up", "mlp.act", "mlp.down", "embed", "lm_head", "sampling"}) {
    ops += std::string(ops.empty() ? "" : ",\n") + "{\"name\": \"" + name +
           "\", \"kind\": \"other\", \"samples\": 10, \"held_out\": 2, \"fit_mape\": 0.1, "
           "\"held_out_mape\": 0.1, \"batch_min_seen\": 1, \"batch_max_seen\": 100000, "
           "\"regimes\": [{\"batch_max\": 100000, \"coefficients\": [5, 0.01, 0, 0]}]}";
  }
  const std::string good =
      "{\"format\": \"exitsim-cost-profile v1\",\n\"source\": {\"engine\": \"exitsim-engine\", "
      "\"backend\": \"cpu\", \"hardware\": \"h100-sxm\", \"model\": \"llama-3-8b\", "
      "\"model_shape\": \"d4096 h32/8x128 ffn14336 v128256 gated depth 32+0x0+0 lora -\", "
      "\"traces\": []},\n\"ops\": [" +
      ops + "]}\n";
  const auto with_mape = [&](const std::string& value) {
    return replaced(good, "\"fit_mape\": 0.1", "\"fit_mape\": " + value);
  };
  std::string long_list = "[";
  for (int i = 0; i < 3000; ++i)
    long_list += std::to_string(i) + ",";
  long_list.back() = ']';
  const std::string nul(1, '\0');
  const std::vector<Case> cases = {
      accepted("valid", good),
      // nlohmann's parser skips a UTF-8 BOM; JSON's whitespace includes CR.
      accepted("BOM", k_bom + good),
      accepted("CRLF", with_crlf(good)),
      refused("empty", "", "expected a JSON cost profile, found invalid JSON at byte 1"),
      refused("not JSON", "format = exitsim-cost-profile v1\n",
              "expected a JSON cost profile, found invalid JSON"),
      refused("truncated", good.substr(0, good.size() / 2),
              "expected a JSON cost profile, found invalid JSON"),
      refused("trailing text", good + "{}", "expected a JSON cost profile, found invalid JSON"),
      refused("wrong format string", replaced(good, "profile v1", "profile v9"),
              "format: expected \"exitsim-cost-profile v1\", found \"exitsim-cost-profile v9\""),
      refused("NaN (not JSON)", with_mape("NaN"),
              "expected a JSON cost profile, found invalid JSON"),
      refused("Infinity (not JSON)", with_mape("Infinity"),
              "expected a JSON cost profile, found invalid JSON"),
      refused("1e400", with_mape("1e400"),
              "expected JSON numbers within the range of a double, found number overflow "
              "parsing '1e400'"),
      refused("-1e400", with_mape("-1e400"), "found number overflow parsing '-1e400'"),
      refused("overflow", replaced(good, "\"samples\": 10", "\"samples\": 99999999999999999999"),
              "ops[0].samples: expected a whole number >= 0, found 1e+20"),
      refused("embedded NUL", with_mape("0." + nul + "1"),
              "expected a JSON cost profile, found a NUL byte at byte"),
      // nlohmann stops at a NUL as at the end of the text: what follows one went unread.
      refused("NUL and text after the JSON", good + nul + "{\"ops\": 1}",
              "expected a JSON cost profile, found a NUL byte at byte"),
      refused("missing key", replaced(good, "\"source\"", "\"sourze\""),
              "source: expected a value, found none"),
      refused("a string for a number", with_mape("\"0.1\""),
              "ops[0].fit_mape: expected a number, found \"0.1\""),
      refused("a long list for a string",
              replaced(good, "\"hardware\": \"h100-sxm\"", "\"hardware\": " + long_list),
              "source.hardware: expected a string, found [0,1,2,"),
  };
  const fs::path in = dir_ / "profile.json";
  const int refusals = check(cases, in, [&](const fs::path& out) {
    return "simulate --set workload.requests=10 --set cost_model.kind=calibrated --set "
           "'cost_model.profile=" +
           in.string() + "' --out " + quoted(out);
  });
  EXPECT_EQ(refusals, 15);
}

// The engine's model: its exitsim.json and model.safetensors, read by `engine run` on a random
// tiny model (one thread, two short requests).
class ModelMatrix : public BadFileMatrix {
 protected:
  std::string engine_run(const std::string& model_and_text, const fs::path& out) const {
    return "engine run " + model_and_text +
           " --set engine.threads=1 --set workload.requests=2 --set "
           "'workload.input_tokens={dist: fixed, value: 8}' --set "
           "'workload.output_tokens={dist: fixed, value: 4}' --out " +
           quoted(out);
  }
};

TEST_F(ModelMatrix, ModelConfigsRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const std::string model_and_text = random_model_and_text("The matrix reads the model. ", 40);
  const fs::path in = dir_ / "model" / "exitsim.json";
  const std::string good = slurp(in);
  ASSERT_NE(good.find("\"d_model\": 192"), std::string::npos) << good;
  const auto with_d_model = [&](const std::string& value) {
    return replaced(good, "\"d_model\": 192", "\"d_model\": " + value);
  };
  const std::vector<Case> cases = {
      accepted("valid", good),
      // nlohmann's parser skips a UTF-8 BOM; JSON's whitespace includes CR.
      accepted("BOM", k_bom + good),
      accepted("CRLF", with_crlf(good)),
      refused("empty", "", "expected valid JSON, found parse error at line 1, column 1"),
      refused("not JSON", "d_model = 192\n", "expected valid JSON, found parse error"),
      refused("not an object", "[1, 2]", "expected a JSON object, found the array [1,2]"),
      refused("truncated", good.substr(0, good.size() / 2),
              "expected valid JSON, found parse error"),
      refused("wrong format string", replaced(good, "exitsim-model v1", "exitsim-model v2"),
              "format: expected \"exitsim-model v1\", found the string \"exitsim-model v2\""),
      refused("non-numeric", with_d_model("\"abc\""),
              "d_model: expected an integer in [1, 16777216], found the string \"abc\""),
      refused("NaN (not JSON)", with_d_model("NaN"), "expected valid JSON, found parse error"),
      refused("1e400", with_d_model("1e400"),
              "expected valid JSON, found number overflow parsing '1e400'"),
      refused("overflow", with_d_model("99999999999999999999"),
              "d_model: expected an integer in [1, 16777216], found the number 1e+20"),
      refused("fractional", with_d_model("192.5"),
              "d_model: expected an integer in [1, 16777216], found the number 192.5"),
      refused("embedded NUL", with_d_model(k_nul_in_39),
              "expected JSON text, found a NUL byte at offset"),
      refused("unknown key", replaced(good, "\"d_model\"", "\"d_modl\""),
              "unknown key \"d_modl\"; did you mean \"d_model\"?"),
      refused("missing key", replaced(good, "\"d_model\": 192,", ""),
              "d_model: expected an integer in [1, 16777216], found none"),
      refused("a list for a boolean",
              replaced(good, "\"tied_embeddings\": true", "\"tied_embeddings\": [1]"),
              "tied_embeddings: expected true or false, found the array [1]"),
  };
  const int refusals =
      check(cases, in, [&](const fs::path& out) { return engine_run(model_and_text, out); });
  EXPECT_EQ(refusals, 14);
}

std::string little_endian(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

// A safetensors file: an 8-byte little-endian header length, the JSON header, the data section.
std::string safetensors(const std::string& header, const std::string& data) {
  return little_endian(header.size()) + header + data;
}

TEST_F(ModelMatrix, SafetensorsRefuseEveryBadInputOnOneLineAndLeaveNothing) {
  const std::string model_and_text = random_model_and_text("The matrix reads the model. ", 40);
  const fs::path in = dir_ / "model" / "model.safetensors";
  const std::string good = slurp(in);
  ASSERT_GT(good.size(), 8U);
  std::uint64_t length = 0;
  for (std::size_t i = 0; i < 8; ++i)
    length |= std::uint64_t{static_cast<unsigned char>(good[i])} << (8 * i);
  ASSERT_LT(length, good.size() - 8);
  const std::string header = good.substr(8, length);
  const std::string data = good.substr(8 + length);
  // The first tensor after the metadata is the embedding, at the start of the data section.
  const std::string embed =
      "\"model.embed_tokens.weight\":{\"data_offsets\":[0,199680],\"dtype\":\"F32\",\"shape\":[260,"
      "192]}";
  ASSERT_NE(header.find(embed), std::string::npos) << header.substr(0, 300);
  const auto with_embed = [&](const std::string& entry) {
    return safetensors(replaced(header, embed, entry), data);
  };
  const auto with_first_weight = [&](std::uint32_t bits) {
    std::string weights = data;
    for (std::size_t i = 0; i < 4; ++i)
      weights[i] = static_cast<char>((bits >> (8 * i)) & 0xFF);
    return safetensors(header, weights);
  };
  const std::vector<Case> cases = {
      accepted("valid", good),
      // Gaps between tensors are allowed (docs/engine_model_format.md), one at the end too.
      accepted("trailing bytes", good + std::string(16, '\0')),
      // JSON parsers may skip a UTF-8 BOM (RFC 8259), and nlohmann's does.
      accepted("header BOM", safetensors(k_bom + header, data)),
      refused("empty", "", "header length: expected a file of at least 8 bytes, found 0 bytes"),
      refused("shorter than the header length", good.substr(0, 5),
              "header length: expected a file of at least 8 bytes, found 5 bytes"),
      refused("header length past the file", little_endian(good.size()) + good.substr(8),
              "header length: expected at most " + std::to_string(good.size() - 8) +
                  " (the bytes after it), found " + std::to_string(good.size())),
      refused("header length overflow", std::string(8, '\xFF') + good.substr(8),
              "header length: expected at most " + std::to_string(good.size() - 8) +
                  " (the bytes after it), found 18446744073709551615"),
      refused("truncated header", good.substr(0, 8 + length / 2),
              "header length: expected at most " + std::to_string(length / 2) +
                  " (the bytes after it), found " + std::to_string(length)),
      refused("truncated data", good.substr(0, good.size() - 1000),
              "\"data_offsets\": expected a range within the " +
                  std::to_string(data.size() - 1000) + "-byte data section"),
      refused("header not JSON", safetensors(std::string(length, 'x'), data),
              "header: expected valid JSON, found parse error at line 1, column 1"),
      refused("header not an object", safetensors("[1, 2]", data),
              "header: expected a JSON object, found the array [1,2]"),
      refused("embedded NUL in the header",
              safetensors(replaced(header, "\"format\":\"pt\"",
                                   "\"format\":\"p" + std::string(1, '\0') + "\""),
                          data),
              "header: expected JSON text, found a NUL byte at offset"),
      refused("1e400 in the header", with_embed(replaced(embed, "[260,", "[1e400,")),
              "header: expected valid JSON, found number overflow parsing '1e400'"),
      refused("overflow in the header",
              with_embed(replaced(embed, "[0,199680]", "[0,99999999999999999999]")),
              "model.embed_tokens.weight: \"data_offsets\": expected an array of two non-negative "
              "integers, found the array [0,1e+20]"),
      refused("unknown dtype", with_embed(replaced(embed, "F32", "F99")),
              "model.embed_tokens.weight: \"dtype\": expected one of BOOL, U8, I8, "),
      refused("a dtype the engine cannot read", with_embed(replaced(embed, "F32", "I32")),
              "model.embed_tokens.weight: expected dtype F32, F16 or BF16, found I32"),
      refused("shape and offsets disagree", with_embed(replaced(embed, "[260,192]", "[260,191]")),
              "model.embed_tokens.weight: \"data_offsets\": expected 198640 bytes for F32 of "
              "shape [260, 191], found 199680 bytes in [0, 199680]"),
      refused("a NaN weight", with_first_weight(0x7FC00000U), "expected finite model weights"),
      refused("an infinite weight", with_first_weight(0x7F800000U),
              "expected finite model weights"),
  };
  const int refusals =
      check(cases, in, [&](const fs::path& out) { return engine_run(model_and_text, out); });
  EXPECT_EQ(refusals, 16);
}

}  // namespace
