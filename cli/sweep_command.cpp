// `exitsim sweep`: every point of a scenario's sweep into a resumable SQLite database.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "commands.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "progress.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {

namespace {

struct SweepArgs {
  ScenarioOptions scenario;
  std::string database = "sweep.db";
  std::string shard = "0/1";
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
};

// A sweep started in the background of a script inherits SIGINT ignored (shells without job
// control do that to background commands), so it could not be interrupted; simulate installs its
// handlers for the same signals. The default action is the right handler here: each run is
// stored in one transaction, so the database is whole at any moment and a rerun resumes it (the
// -wal file a killed sweep leaves holds stored runs and must not be removed).
void stop_on_interrupt_and_terminate() {
  for (const int signal_number : {SIGINT, SIGTERM})
    std::signal(signal_number, SIG_DFL);
}

void run_sweep_command(const SweepArgs& args) {
  stop_on_interrupt_and_terminate();
  analysis::SweepOptions options;
  options.scenario_file = args.scenario.file;
  options.overrides = args.scenario.overrides;
  options.database = args.database;
  options.shard = analysis::parse_shard(args.shard);
  options.jobs = std::max(1U, args.jobs);
  std::size_t skipped = 0;
  std::size_t stale = 0;
  std::size_t total = 0;
  ProgressReporter reporter("sweep", "runs");
  options.progress = [&](const analysis::SweepProgress& p) {
    skipped = p.skipped;
    stale = p.stale;
    total = p.total;
    if (p.total > 0)
      reporter.update(static_cast<double>(p.done), static_cast<double>(p.total));
  };
  std::size_t made = 0;
  if (analysis::launched_by_mpi()) {
    const std::optional<std::size_t> on_rank0 = analysis::run_sweep_mpi(options);
    if (!on_rank0)
      return;  // rank 0 reports
    made = *on_rank0;
  } else {
    made = analysis::run_sweep(options);
  }
  reporter.finish();
  fmt::print("sweep      {} runs made, {} already in {} (shard {}), {}\n", made, skipped,
             args.database, args.shard,
             analysis::launched_by_mpi() ? std::string("over MPI ranks")
                                         : fmt::format("{} jobs", options.jobs));
  if (stale > 0) {
    fmt::print(
        "sweep      {} stored runs were stale (their scenario or an input file changed since "
        "they ran): run again and replaced\n",
        stale);
  }
  if (made < total)
    fmt::print("sweep      {} runs left\n", total - made);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* command = app.add_subcommand(
      "sweep",
      "Run every combination of the scenario's sweep axes into a SQLite database (one row per "
      "run with its resolved scenario and metrics); rerunning resumes where it stopped");
  args->scenario.add_to(*command);
  command->add_option("--db", args->database, "SQLite database of results (default sweep.db)");
  command->add_option("--jobs,-j", args->jobs, "Runs at a time (default: the cores)");
  command->add_option("--shard", args->shard,
                      "Run only points i, i+N, i+2N, ... (i/N, for job arrays; default 0/1)");
  // `exitsim sweep merge OUT IN...`: one database from a job array's per-task databases.
  auto merge_args = std::make_shared<std::vector<std::string>>();
  CLI::App* merge = command->add_subcommand(
      "merge",
      "Merge the databases of one sweep's shards (e.g. one per job-array task) into a new one, "
      "keeping where each run came from; refuses databases of different sweeps");
  merge->add_option("databases", *merge_args, "OUT.db IN.db...: the new database, then the inputs")
      ->required()
      ->expected(2, -1);
  merge->callback([merge_args] {
    const std::string& out = merge_args->front();
    const std::vector<std::string> inputs(merge_args->begin() + 1, merge_args->end());
    const std::size_t runs = analysis::merge_sweep_databases(out, inputs);
    fmt::print("merged     {} runs of {} databases into {}\n", runs, inputs.size(), out);
  });
  command->callback([args, merge] {
    if (!merge->parsed())
      run_sweep_command(*args);
  });
}

}  // namespace exitsim::cli
