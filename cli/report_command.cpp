// `exitsim report`: one self-contained HTML page (and JSON and CSV) from the pipeline's outputs.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "exitsim/analysis/report.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> databases;
  std::string quality;
  std::string profile;
  std::string validation;
  std::string plan;
  std::string efficiency;  // "": the plan's capacity when it covers every run, else throughput
  std::string quality_metric = "nll";
  double max_quality_loss = 0.01;
  std::string out = "report.html";
};

// A plan or validation file whole, capped as every JSON input is (core/json_input.hpp).
std::string read_whole(const std::string& path, const char* option) {
  if (!std::filesystem::exists(path))
    throw InputError({path, 0, 0, option}, expected_found("a readable file", "none"));
  std::string text = read_text_file(path, traces::k_max_json_document_bytes, "JSON");
  // An empty file given is a mistake (a failed earlier step), not "no such input".
  if (text.empty())
    throw InputError({path, 0, 0, option}, expected_found("a JSON file", "an empty file"));
  return text;
}

void run_report(const ReportArgs& args) {
  analysis::ReportInputs in;
  if (args.databases.size() == 1) {
    const std::string& path = args.databases.front();
    if (!std::filesystem::exists(path))
      throw InputError({path, 0, 0, "--db"}, expected_found("a sweep database", "none"));
    in.runs = analysis::SweepDatabase(path, analysis::SweepDatabase::Access::read_only).runs();
  } else if (args.databases.size() > 1) {
    // A job array's databases, read as one sweep (the same checks as `sweep merge`).
    in.runs = analysis::read_sweep_databases(args.databases).runs;
  }
  if (!args.quality.empty())
    in.quality = policy::QualityTable::read(args.quality);
  if (!args.profile.empty())
    in.profile = sim::CostProfile::read(args.profile);
  if (!args.validation.empty())
    in.validation_json = read_whole(args.validation, "--validation");
  in.validation_path = args.validation;
  if (!args.plan.empty())
    in.plan_json = read_whole(args.plan, "--plan");
  in.plan_path = args.plan;
  if (args.quality_metric == "agreement") {
    in.quality_objective = {"top1_agreement", true};
  } else if (args.quality_metric != "nll") {
    throw InputError({"", 0, 0, "--quality-metric"},
                     expected_found("nll or agreement", "\"" + args.quality_metric + "\""));
  }
  const std::string efficiency =
      args.efficiency.empty() ? analysis::default_efficiency(in) : args.efficiency;
  // Latencies and memory are better when lower; rates, capacities and attainment when higher.
  const bool lower_is_better = efficiency.ends_with("_ms") || efficiency == "mean_exit_depth";
  in.efficiency_objective = {efficiency, !lower_is_better};
  in.max_quality_loss = args.max_quality_loss;
  const analysis::Report report = analysis::build_report(in);

  const std::filesystem::path html(args.out);
  const std::string json = std::filesystem::path(html).replace_extension(".json").string();
  const std::string csv = (html.parent_path() / (html.stem().string() + "_frontier.csv")).string();
  if (!html.parent_path().empty())
    std::filesystem::create_directories(html.parent_path());
  traces::write_file_atomically(args.out, report.html);
  traces::write_file_atomically(json, report.json);
  traces::write_file_atomically(csv, report.frontier_csv);
  fmt::print("verdict    {}\n", report.verdict);
  for (const std::string& note : report.notes)
    fmt::print("note       {}\n", note);
  std::size_t distinct = 0;
  for (const analysis::FrontierRow& p : report.points)
    distinct += p.same_as == p.run ? 1U : 0U;
  fmt::print(
      "frontier   {} of {} distinct configurations ({} runs; runs doing the same work are one), "
      "hypervolume {:.4g}\n",
      report.frontier.size(), distinct, report.points.size(), report.hypervolume);
  fmt::print("report     {} (with {} and {})\n", args.out, json, csv);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Write one self-contained HTML report (inline SVG, no network) with the Pareto frontier, "
      "throughput per strategy, latency, depth and KV charts, capacity, calibration and "
      "validation error; plus JSON and CSV of every number");
  command
      ->add_option("--db", args->databases,
                   "Sweep database (exitsim sweep); several (repeat, or a,b) are one sweep's "
                   "shards, read as one")
      ->delimiter(',');
  command->add_option("--quality", args->quality, "Quality table (exitsim engine eval)");
  command->add_option("--profile", args->profile, "Cost profile (exitsim calibrate)");
  command->add_option("--validation", args->validation, "validation.json (exitsim validate)");
  command->add_option("--plan", args->plan,
                      "Plan JSON (exitsim plan -o FILE.csv writes FILE.json)");
  command->add_option("--efficiency", args->efficiency,
                      "Efficiency axis: sustainable_load or sustainable_tokens_per_s (from "
                      "--plan), or a run metric such as throughput_tokens_per_s (default: "
                      "sustainable_load when the plan covers every run, else "
                      "throughput_tokens_per_s)");
  command->add_option("--quality-metric", args->quality_metric, "Quality axis: nll or agreement");
  command
      ->add_option("--max-quality-loss", args->max_quality_loss,
                   "The verdict's quality budget: the most NLL a configuration may add over full "
                   "depth, as a fraction (default 0.01: 1%)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("-o,--out", args->out, "The HTML file to write (default report.html)");
  command->callback([args] { run_report(*args); });
}

}  // namespace exitsim::cli
