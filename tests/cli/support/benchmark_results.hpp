#pragma once
// Serving-benchmark results made by the CLI tests from `exitsim simulate` runs, as vLLM writes
// them (validate --against and calibrate --against read them back).

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace cli_support {

class BenchmarkResults : public Cli {
 protected:
  // Simulates `scenario_args` (a scenario and its --set overrides) with Poisson arrivals at
  // `rate` req/s and writes its requests to `name`, in arrival order, as `vllm bench
  // serve --save-result --save-detailed` would have: ttfts in seconds and output_len - 1
  // inter-token gaps each equal to the request's TPOT (the per-request CSV holds no single gaps),
  // duration the simulated makespan; `extra` (JSON) replaces keys of the result.
  fs::path simulated_result(const std::string& scenario_args, double rate, const std::string& name,
                            const std::string& extra = "") {
    using nlohmann::json;
    const fs::path sim = dir_ / ("sim_" + name);
    const Result r = run("simulate " + scenario_args + " --set workload.arrivals.process=poisson" +
                         " --set workload.arrivals.rate=" + std::to_string(rate) + " --out '" +
                         sim.string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream csv(slurp(sim / "requests.csv"));
    std::string line;
    std::getline(csv, line);  // header
    struct Row {
      long long id, first_token, completion, input, output;
      double ttft_ms;
    };
    std::vector<Row> rows;
    while (std::getline(csv, line)) {
      std::vector<std::string> f;
      std::stringstream fields(line);
      for (std::string x; std::getline(fields, x, ',');)
        f.push_back(x);
      // request_id,replica,arrival_ns,first_scheduled_ns,first_token_ns,completion_ns,
      // input_tokens,output_tokens,preemptions,ttft_ms,tpot_ms,e2e_ms
      rows.push_back({std::stoll(f[0]), std::stoll(f[4]), std::stoll(f[5]), std::stoll(f[6]),
                      std::stoll(f[7]), std::stod(f[9])});
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
    json j = json::parse(slurp(sim / "summary.json"));
    json result = {{"date", "20250101-000000"},
                   {"backend", "vllm"},
                   {"model_id", "meta-llama/Meta-Llama-3-8B"},
                   {"tokenizer_id", "meta-llama/Meta-Llama-3-8B"},
                   {"num_prompts", rows.size()},
                   {"request_rate", rate},
                   {"burstiness", 1.0},
                   {"max_concurrency", nullptr},
                   {"duration", j["makespan_s"]}};
    json inputs = json::array(), outputs = json::array(), ttfts = json::array(),
         itls = json::array(), errors = json::array();
    for (const Row& row : rows) {
      inputs.push_back(row.input);
      outputs.push_back(row.output);
      ttfts.push_back(row.ttft_ms / 1000.0);
      json gaps = json::array();
      for (long long k = 1; k < row.output; ++k) {
        gaps.push_back(static_cast<double>(row.completion - row.first_token) /
                       static_cast<double>(row.output - 1) / 1e9);
      }
      itls.push_back(gaps);
      errors.push_back("");
    }
    result["input_lens"] = inputs;
    result["output_lens"] = outputs;
    result["ttfts"] = ttfts;
    result["itls"] = itls;
    result["errors"] = errors;
    json edited = json::parse(extra.empty() ? "{}" : extra);
    result.update(edited);
    return file(name, result.dump());
  }
};

}  // namespace cli_support
