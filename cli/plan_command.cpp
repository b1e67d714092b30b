// `exitsim plan`: per-replica capacity of each candidate and the replicas a target needs.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli_grammar.hpp"
#include "commands.hpp"
#include "exitsim/analysis/plan.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "output_paths.hpp"
#include "progress.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {

namespace {

struct PlanArgs {
  ScenarioOptions scenario;
  analysis::PlanOptions options;
  double target_rate = 0;
  double trace_scale = 0;
  std::vector<std::string> gpu_hour_prices;  // "P" or "NAME=P"
  std::string out;
};

// "--gpu-hour-prices 2.5" prices every accelerator; "--gpu-hour-prices h100-sxm=2.5" one of them.
void parse_gpu_hour_prices(const std::vector<std::string>& given, analysis::PlanOptions& options) {
  for (const std::string& entry : given) {
    const std::size_t eq = entry.find('=');
    const std::string name = eq == std::string::npos ? "" : entry.substr(0, eq);
    const std::string number = eq == std::string::npos ? entry : entry.substr(eq + 1);
    double price = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), price);
    if (error != std::errc() || end != number.data() + number.size() || !(price >= 0) ||
        !std::isfinite(price) || (eq != std::string::npos && name.empty())) {
      throw InputError({"", 0, 0, "--gpu-hour-prices"},
                       expected_found("a price per GPU-hour >= 0, or NAME=PRICE for one "
                                      "accelerator (hardware.name)",
                                      "\"" + entry + "\""));
    }
    if (name.empty())
      options.gpu_hour_price = price;
    else
      options.gpu_hour_prices[name] = price;
  }
}

void run_plan(PlanArgs& args) {
  if (!args.out.empty())
    check_output_file_folder(args.out, "--out");
  args.options.scenario_file = args.scenario.file;
  args.options.overrides = args.scenario.overrides;
  if (args.target_rate != 0)
    args.options.target_rate = args.target_rate;
  if (args.trace_scale != 0)
    args.options.trace_scale = args.trace_scale;
  parse_gpu_hour_prices(args.gpu_hour_prices, args.options);
  ProgressReporter reporter("plan", "candidates");
  analysis::PlanOptions options = args.options;
  options.progress = [&](std::size_t done, std::size_t total) {
    reporter.update(static_cast<double>(done), static_cast<double>(total));
  };
  const analysis::Plan plan = analysis::plan_capacity(options);
  reporter.finish();
  fmt::print("{:<48} {:>18} {:>12} {:>11} {:>11} {:>11} {:>9} {:>5} {:>10}\n", "candidate",
             "replica", "max load", "saturation", "TPOT p99", "TTFT p99", "replicas", "GPUs",
             "cost/h");
  for (const analysis::CandidatePlan& c : plan.candidates) {
    fmt::print(
        "{:<48} {:>18} {:>12} {:>11.4g} {:>8.2f} ms {:>8.1f} ms {:>9} {:>5} {:>10.2f}\n",
        c.point.key.empty() ? "(scenario)" : c.point.key,
        fmt::format("{} x {}", c.gpus_per_replica, c.hardware),
        fmt::format("{}{:.4g}", c.max_load_is_lower_bound ? ">=" : "", c.max_load_per_replica),
        c.saturation_load, c.steady_at_max_rate.tpot_p99_ms, c.steady_at_max_rate.ttft_p99_ms,
        c.replicas > 0 ? std::to_string(c.replicas) : "-",
        c.gpus > 0 ? std::to_string(c.gpus) : "-", c.cost_per_hour);
  }
  if (!plan.candidates.empty()) {
    fmt::print("load       {} per replica\n", plan.candidates.front().load_key);
    fmt::print(
        "saturation each candidate's completion rate on a backlogged run of {} requests (no load "
        "at or above it is sustainable)\n",
        plan.candidates.front().saturation_requests);
  }
  for (const analysis::CandidatePlan& c : plan.candidates) {
    const std::string name = c.point.key.empty() ? "(scenario)" : c.point.key;
    if (c.steady_at_max_rate.window_too_short) {
      fmt::print(
          "WARNING    {}: at its max load the run is mostly warm-up (steady window {} of its "
          "requests): the queue test was not applied; give more workload.requests\n",
          name, c.steady_at_max_rate.requests);
    }
    if (c.disaggregated) {
      fmt::print(
          "NOTE       {}: prefill and decode pools sized apart ({} + {} replicas); saturation "
          "is not measured for them (no replica serves a request alone), so loads are not "
          "bounded by it\n",
          name, c.prefill_replicas, c.decode_replicas);
    } else if (c.saturation_load <= 0) {
      fmt::print(
          "WARNING    {}: too few requests ({}) to measure saturation throughput: loads are not "
          "bounded by it\n",
          name, c.saturation_requests);
    }
    if (c.max_load_is_lower_bound) {
      fmt::print(
          "WARNING    {}: the SLOs held at every load tried, up to {:.4g}: its capacity is "
          "at least that, not that\n",
          name, c.max_load_per_replica);
    }
  }
  fmt::print("recommend  {}\n", plan.recommendation);
  if (!args.out.empty()) {
    make_output_file_folder(args.out);
    traces::write_file_atomically(args.out, analysis::plan_csv(plan));
    const std::string json = std::filesystem::path(args.out).replace_extension(".json").string();
    traces::write_file_atomically(json, analysis::plan_json(plan));
    fmt::print("wrote      {} and {}\n", args.out, json);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  args->options.jobs = std::max(1U, std::thread::hardware_concurrency());
  CLI::App* command = app.add_subcommand(
      "plan",
      "Capacity planning: for each candidate (the points of the scenario's sweep), the highest "
      "load one replica sustains within the SLOs (bisection over simulated runs) and the fewest "
      "replicas for a target rate or a scaled trace");
  args->scenario.add_to(*command);
  command->add_option("--target-rate", args->target_rate, "Requests/s to serve (synthetic)");
  command->add_option("--trace-scale", args->trace_scale,
                      "Serve the replayed trace at k times its rate (workload.source: trace)");
  command
      ->add_option("--gpu-hour-prices", args->gpu_hour_prices,
                   "Prices of one GPU-hour, for cost figures: P for every accelerator, or "
                   "NAME=P per accelerator (hardware.name), e.g. h100-sxm=2.5,h200=3.5")
      ->delimiter(',');
  add_renamed_option(*command, "--gpu-hour-price", "--gpu-hour-prices", args->gpu_hour_prices);
  command->add_option("--attainment", args->options.min_attainment,
                      "Fraction of requests that must meet every SLO (default 0.9)");
  command->add_option("--max-replicas", args->options.max_replicas, "Most replicas to try");
  command->add_option("--jobs,-j", args->options.jobs, "Candidates at a time (default: the cores)");
  command->add_option("-o,--out", args->out, "Write the plan as CSV");
  command->callback([args] { run_plan(*args); });
}

}  // namespace exitsim::cli
