// `exitsim calibrate --against RESULT... --scenario S -o hw.yaml`: the default scenario's roofline
// fitted to vLLM results of a deployment whose GEMMs reach 0.6 of the bandwidth (not 0.85),
// written as sections `validate --against --overlay` lays over the scenario; and its refusals,
// each one line that leaves nothing behind.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/benchmark_results.hpp"

namespace {

using namespace cli_support;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_scenario = "scenarios/default.yaml";
constexpr const char* k_workload = " --set workload.requests=200 --set seed=11";

class CalibrateAgainst : public BenchmarkResults {
 protected:
  // The runs at `rates` of the default scenario with GEMMs at 0.6 of the bandwidth.
  std::string slow_memory_runs(std::initializer_list<double> rates) {
    std::string files;
    for (const double rate : rates) {
      files += " '" +
               simulated_result(std::string(k_scenario) + k_workload +
                                    " --set cost_model.bandwidth_efficiency=0.6",
                                rate, "rate" + std::to_string(static_cast<int>(rate)) + ".json")
                   .string() +
               "'";
    }
    return files;
  }

  // The one line of an error, which names `key` and says `what`.
  static void expect_one_line(const Result& r, const std::string& key, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }
};

// Three rates, 8 req/s held out: the bandwidth efficiency comes back near 0.6 (the runs' arrivals
// are another draw than the fit's, and their ITLs are each request's TPOT repeated, so within
// 0.1), the TP-1 collective terms are not fitted and said, the section is the same on a second
// run, and validate with it as an overlay prints both comparisons, the fitted one closer.
TEST_F(CalibrateAgainst, FitsTheBandwidthAndValidateShowsBeforeAndAfter) {
  const std::string runs = slow_memory_runs({2, 4, 8});
  const fs::path section = dir_ / "hw.yaml";
  const std::string command = std::string("calibrate --against") + runs + " --scenario " +
                              k_scenario + " -o '" + section.string() + "'";
  const Result fit = run(command);
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_NE(fit.out.find("fit        fitted cost_model.bandwidth_efficiency: 0.85 -> "),
            std::string::npos)
      << fit.out;
  EXPECT_NE(fit.out.find("fit        not fitted hardware.link_latency_us: the scenario runs no "
                         "all-reduce (parallel.tensor 1)"),
            std::string::npos)
      << fit.out;
  EXPECT_NE(fit.out.find("fit        held out "), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("time       "), std::string::npos) << fit.out;
  const std::string yaml = slurp(section);
  EXPECT_NE(yaml.find("\nhardware:\n  preset: h100-sxm\n"), std::string::npos) << yaml;
  const std::size_t efficiencies = yaml.find("\ncost_model:\n  flops_efficiency: ");
  ASSERT_NE(efficiencies, std::string::npos) << yaml;
  const std::string key = "  bandwidth_efficiency: ";
  const std::size_t bandwidth = yaml.find(key, efficiencies);
  ASSERT_NE(bandwidth, std::string::npos) << yaml;
  EXPECT_NEAR(std::stod(yaml.substr(bandwidth + key.size())), 0.6, 0.1) << yaml;
  EXPECT_NE(yaml.find("#   not fitted hardware.link_latency_us"), std::string::npos) << yaml;
  const fs::path again = dir_ / "again.yaml";
  ASSERT_EQ(run(std::string("calibrate --against") + runs + " --scenario " + k_scenario + " -o '" +
                again.string() + "'")
                .exit_code,
            0);
  EXPECT_EQ(slurp(again), yaml);  // deterministic: the time taken is on the console only

  const fs::path out = dir_ / "validation";
  const Result v =
      run(std::string("validate ") + k_scenario + " --against '" + (dir_ / "rate8.json").string() +
          "' --overlay '" + section.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("full_depth: against the benchmark"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("full_depth+overlay: against the benchmark"), std::string::npos) << v.out;
  const json j = json::parse(slurp(out / "validation.json"));
  ASSERT_EQ(j["strategies"].size(), 2U);
  EXPECT_EQ(j["against"]["overlay"], section.string());
  const auto tpot_error = [&](std::size_t k) {
    for (const json& m : j["strategies"][k]["metrics"]) {
      if (m["metric"] == "tpot_p50_ms")
        return m["relative_error"].get<double>();
    }
    return -1.0;
  };
  EXPECT_GT(tpot_error(0), 0.2) << v.out;  // the preset's 0.85 against the truth's 0.6
  EXPECT_LT(tpot_error(1), 0.1) << v.out;
}

TEST_F(CalibrateAgainst, RefusesWhatCannotBeFittedInOneLine) {
  const fs::path fixture =
      fs::path(EXITSIM_SOURCE_DIR) / "tests/traces/serving_benchmark/vllm_result.json";
  const fs::path section = dir_ / "hw.yaml";
  const std::string to =
      " --scenario " + std::string(k_scenario) + " -o '" + section.string() + "'";
  const std::string one = " '" + fixture.string() + "'";
  // One run: nothing to hold out.
  expect_one_line(run("calibrate --against" + one + to), "--against",
                  "expected serving-benchmark runs at two or more request rates");
  // Two runs: one to fit, whose five figures cannot fix the parameters that move them.
  const std::string two = slow_memory_runs({2, 4});
  expect_one_line(run("calibrate --against" + two + to), "--against",
                  "expected at least as many fitted figures as parameters moving them");
  // A file that is not there, a rate no run has, a rate that is no number.
  expect_one_line(
      run("calibrate --against" + one + " '" + (dir_ / "none.json").string() + "'" + to),
      "none.json", "");
  expect_one_line(run("calibrate --against" + two + " --hold-out 5" + to), "--hold-out",
                  "expected the request rate of one of the runs");
  expect_one_line(run("calibrate --against" + two + " --hold-out fast" + to), "--hold-out",
                  "expected a request rate in requests/s, or inf");
  // No scenario; the fit's options without --against; another source beside it.
  expect_one_line(run("calibrate --against" + two + " -o '" + section.string() + "'"), "--scenario",
                  "expected the scenario of the benchmarked deployment");
  expect_one_line(run("calibrate --hold-out 2" + one + " -o '" + section.string() + "'"),
                  "--hold-out", "expected --against");
  expect_one_line(run("calibrate --against" + two + " --kineto" + one + to), "--kineto",
                  "expected no other source's option with --against");
  EXPECT_FALSE(fs::exists(section));
}

// A real sweep: GuideLLM's five runs against one vLLM server (../shared/benchmarks; the requests
// name CodeLlama-34B-Instruct, H100, TP 1), read from the one file at their recorded send times.
// The run GuideLLM sent fastest (its throughput strategy, 3.94 req/s measured) is held out; the
// preset misses its p50s by 33-54% (measured 2026-12-07: TTFT +54.3%, TPOT +33.2%, E2E +42.0%),
// the fit from the four slower runs by at most 8.7%. Asserted: every held-out p50 error shrinks to
// within 15%, a margin that a fit which only moved the throughput could not meet.
TEST_F(CalibrateAgainst, ARealGuidellmSweepPredictsItsFastestRun) {
  const std::string guidellm =
      std::string(EXITSIM_SHARED_BENCHMARKS_DIR) + "/guidellm_llama2_7b_tp1_h100.json";
  const std::string config = std::string(EXITSIM_SHARED_BENCHMARKS_DIR) +
                             "/../models/hf/codellama-34b-instruct-hf/config.json";
  if (!fs::exists(guidellm) || !fs::exists(config))
    GTEST_SKIP() << "../shared/benchmarks or ../shared/models is absent";
  const Result fit = run("calibrate --against '" + guidellm + "' --scenario " + k_scenario +
                         " --set model.preset=null --set 'model.hf_config=" + config + "' -o '" +
                         (dir_ / "hw.yaml").string() + "'");
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_NE(fit.out.find("run 2 at 3.94 req/s (held out)"), std::string::npos) << fit.out;
  const std::size_t held = fit.out.find("errors before -> after: ");
  ASSERT_NE(held, std::string::npos) << fit.out;
  const std::string line = fit.out.substr(held, fit.out.find('\n', held) - held);
  for (const char* figure : {"TTFT ", "TPOT ", "E2E "}) {
    const std::size_t at = line.find(figure);
    ASSERT_NE(at, std::string::npos) << line;
    const double before = std::stod(line.substr(at + std::string(figure).size()));
    const std::size_t arrow = line.find("-> ", at);
    const double after = std::stod(line.substr(arrow + 3));
    EXPECT_GT(std::abs(before), 30.0) << figure << line;
    EXPECT_LT(std::abs(after), 15.0) << figure << line;
  }
}

}  // namespace
