// `exitsim validate --against RESULT.json`: a vLLM result made here from the simulator's own run
// is reproduced on the same scenario and not on a slower one; engine-only options, a missing
// scenario, a closed client limit and a broken file are refused in one line, leaving nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/benchmark_results.hpp"
#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_scenario = "scenarios/default.yaml";
constexpr const char* k_workload =
    " --set workload.requests=300 --set workload.arrivals.rate=2 --set seed=11";

class ValidateAgainst : public BenchmarkResults {
 protected:
  // The default scenario's run at 2 req/s as vLLM would have written it.
  fs::path simulated_result(const std::string& extra = "") {
    return BenchmarkResults::simulated_result(std::string(k_scenario) + k_workload, 2.0,
                                              "result.json", extra);
  }

  std::map<std::string, json> metrics_of(const fs::path& out) const {
    const json v = json::parse(slurp(out / "validation.json"));
    std::map<std::string, json> m;
    for (const json& metric : v["strategies"][0]["metrics"])
      m[metric["metric"].get<std::string>()] = metric;
    return m;
  }
};

TEST_F(ValidateAgainst, ReproducesItsOwnRunAndNotASlowerOne) {
  const fs::path result = simulated_result();
  const fs::path out = dir_ / "validation";
  const Result same = run(std::string("validate ") + k_scenario + " --against '" + result.string() +
                          "' -o '" + out.string() + "'");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("full_depth: against the benchmark"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("not matched arrivals: not in the file"), std::string::npos);
  ASSERT_TRUE(fs::exists(out / "validation.csv"));
  const auto m = metrics_of(out);
  // The replay draws other arrival times than the run that wrote the file (that is the point:
  // arrivals are not in vLLM's file). At 2 requests/s the batches stay small, so a request's TTFT
  // and TPOT hardly depend on who else is in its batch: 10% on the p50s. Throughput divides by a
  // makespan that ends with the last Poisson arrival, whose time varies by 1/sqrt(300) ~ 6%
  // between draws: 15%.
  for (const char* name : {"ttft_p50_ms", "tpot_p50_ms", "e2e_p50_ms"})
    EXPECT_LT(m.at(name)["relative_error"].get<double>(), 0.10) << name << same.out;
  EXPECT_LT(m.at("throughput_tokens_per_s")["relative_error"].get<double>(), 0.15) << same.out;
  EXPECT_EQ(m.at("ttft_p50_ms")["simulated_seeds"], 5);
  EXPECT_LE(m.at("ttft_p50_ms")["simulated_seed_min"].get<double>(),
            m.at("ttft_p50_ms")["simulated_seed_max"].get<double>());
  const json v = json::parse(slurp(out / "validation.json"));
  EXPECT_EQ(v["against"]["format"], "vllm");
  EXPECT_EQ(v["against"]["requests_compared"], 300);
  EXPECT_EQ(v["against"]["arrival_seeds"].size(), 5u);

  // Half the FLOP/s and bandwidth: every step takes about twice as long.
  const fs::path slow = dir_ / "slow";
  const Result slower =
      run(std::string("validate ") + k_scenario + " --against '" + result.string() +
          "' --set cost_model.flops_efficiency=0.35 --set "
          "cost_model.bandwidth_efficiency=0.425 --arrival-seeds 2 -o '" +
          slow.string() + "'");
  ASSERT_EQ(slower.exit_code, 0) << slower.err;
  const auto s = metrics_of(slow);
  EXPECT_GT(s.at("tpot_p50_ms")["relative_error"].get<double>(), 0.5) << slower.out;
  EXPECT_GT(s.at("e2e_p50_ms")["relative_error"].get<double>(), 0.5) << slower.out;
  EXPECT_EQ(s.at("tpot_p50_ms")["simulated_seeds"], 2);
}

TEST_F(ValidateAgainst, RefusesEngineOptionsAndAMissingScenario) {
  const fs::path result = file("r.json", slurp(fs::path(EXITSIM_SOURCE_DIR) /
                                               "tests/traces/serving_benchmark/vllm_result.json"));
  const fs::path out = dir_ / "out";
  const Result profile = run(std::string("validate ") + k_scenario + " --against '" +
                             result.string() + "' --profile p.json -o '" + out.string() + "'");
  EXPECT_NE(profile.exit_code, 0);
  EXPECT_EQ(profile.err,
            "exitsim: error: --profile: expected no engine option with --against (the simulator "
            "replays the benchmark; the engine does not run), found --profile\n");
  const Result repeat = run(std::string("validate ") + k_scenario + " --against '" +
                            result.string() + "' --repeat 3 -o '" + out.string() + "'");
  EXPECT_NE(repeat.exit_code, 0);
  EXPECT_NE(repeat.err.find("--repeat: expected no engine option with --against"),
            std::string::npos);
  const Result no_scenario =
      run("validate --against '" + result.string() + "' -o '" + out.string() + "'");
  EXPECT_NE(no_scenario.exit_code, 0);
  EXPECT_NE(no_scenario.err.find("--against: expected a scenario file with it"), std::string::npos)
      << no_scenario.err;
  const Result seeds_alone = run(std::string("validate ") + k_scenario + " --arrival-seeds 3");
  EXPECT_NE(seeds_alone.exit_code, 0);
  EXPECT_NE(seeds_alone.err.find("--arrival-seeds: expected --against"), std::string::npos)
      << seeds_alone.err;
  const Result engine = run(std::string("validate ") + k_scenario);
  EXPECT_NE(engine.exit_code, 0);
  EXPECT_NE(engine.err.find("--model is required"), std::string::npos) << engine.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(ValidateAgainst, MaxConcurrencyIsRefusedUnlessIgnoredAndThenSaid) {
  std::string text =
      slurp(fs::path(EXITSIM_SOURCE_DIR) / "tests/traces/serving_benchmark/vllm_result.json");
  json j = json::parse(text);
  j["max_concurrency"] = 4;
  const fs::path result = file("r.json", j.dump());
  const fs::path out = dir_ / "out";
  const std::string base = std::string("validate ") + k_scenario + " --against '" +
                           result.string() + "' --arrival-seeds 2 -o '" + out.string() + "'";
  const Result refused = run(base);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(refused.err, "exitsim: error: " + result.string() +
                             ": max_concurrency: expected null: the simulator has no closed "
                             "client limit (give --ignore-max-concurrency to compare anyway, as "
                             "an open workload), found 4\n");
  EXPECT_TRUE(refused.out.empty());
  EXPECT_FALSE(fs::exists(out));
  const Result ignored = run(base + " --ignore-max-concurrency");
  ASSERT_EQ(ignored.exit_code, 0) << ignored.err;
  EXPECT_NE(ignored.out.find("not matched max_concurrency 4:"), std::string::npos) << ignored.out;
  EXPECT_NE(ignored.out.find("not matched 1 of 20 requests failed in the benchmark"),
            std::string::npos)
      << ignored.out;
  const json v = json::parse(slurp(out / "validation.json"));
  EXPECT_EQ(v["against"]["max_concurrency_ignored"], true);
  EXPECT_EQ(v["against"]["excluded_failed"], 1);
  EXPECT_EQ(v["against"]["model_id"], "meta-llama/Llama-3.1-8B-Instruct");
}

TEST_F(ValidateAgainst, ABrokenFileIsOneLineAndLeavesNothing) {
  const fs::path result = file("bad.json",
                               "{\"model_id\": \"m\", \"request_rate\": 1, "
                               "\"duration\": 1, \"input_lens\": [1], "
                               "\"output_lens\": [2], \"ttfts\": [0.1], "
                               "\"itls\": [[\"x\"]]}");
  const fs::path out = dir_ / "out";
  const Result r = run(std::string("validate ") + k_scenario + " --against '" + result.string() +
                       "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "exitsim: error: " + result.string() +
                       ": itls[0][0]: expected an inter-token latency in seconds, >= 0 and "
                       "finite, found \"x\"\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(fs::exists(out));
  // Nothing beside the input and the captured streams: no folder, no staging left over.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"bad.json", "stderr.txt", "stdout.txt"}));
}

// N7: arrivals reconstructed from a tiny rate would leave the simulator's arrival range.
TEST_F(ValidateAgainst, ARateWhoseArrivalsLeaveTheClockIsOneLine) {
  const fs::path result = file("rate.json",
                               "{\"model_id\": \"m\", \"request_rate\": 1e-300, "
                               "\"duration\": 1, \"input_lens\": [1, 1], "
                               "\"output_lens\": [2, 2], \"ttfts\": [0.1, 0.1], "
                               "\"itls\": [[0.1], [0.1]]}");
  const fs::path out = dir_ / "out";
  const Result r = run(std::string("validate ") + k_scenario + " --against '" + result.string() +
                       "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "exitsim: error: " + result.string() +
                       ": request_rate: expected a request rate whose reconstructed arrivals span "
                       "at most 2^62 ns (about 146 years), found 1e-300 (2 requests over "
                       "2e+300 s)\n");
  EXPECT_FALSE(fs::exists(out));
}

// N13: the file's model_id reaches the console as error messages show text: no raw ESC.
TEST_F(ValidateAgainst, ControlBytesOfTheFileAreEscapedOnTheConsole) {
  const fs::path result = simulated_result(R"({"model_id": "m\u001b[31m RED"})");
  const fs::path out = dir_ / "out";
  const Result r = run(std::string("validate ") + k_scenario + k_workload + " --against '" +
                       result.string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("not matched model: the file names \"m\\x1b[31m RED\""), std::string::npos)
      << r.out;
}

}  // namespace
