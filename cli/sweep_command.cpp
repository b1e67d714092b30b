// `exitsim sweep`: every point of a scenario's sweep into a resumable SQLite database.
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "commands.hpp"
#include "exitsim/analysis/sweep.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {

namespace {

struct SweepArgs {
  ScenarioOptions scenario;
  std::string database = "sweep.db";
  std::string shard = "0/1";
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
};

std::string eta_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

// A one-line bar redrawn in place on a terminal; nothing when stderr is a file or a pipe.
void draw_progress(const analysis::SweepProgress& p) {
  if (isatty(fileno(stderr)) == 0 || p.total == 0)
    return;
  constexpr std::size_t k_width = 30;
  const double fraction = static_cast<double>(p.done) / static_cast<double>(p.total);
  const auto filled = static_cast<std::size_t>(fraction * static_cast<double>(k_width));
  const double eta =
      p.done > 0 ? p.elapsed_s / static_cast<double>(p.done) * static_cast<double>(p.total - p.done)
                 : 0.0;
  fmt::print(stderr, "\r[{}{}] {}/{} runs, {} elapsed, ETA {}", std::string(filled, '#'),
             std::string(k_width - filled, '.'), p.done, p.total, eta_text(p.elapsed_s),
             p.done > 0 ? eta_text(eta) : "-");
  if (p.done == p.total)
    fmt::print(stderr, "\n");
  std::fflush(stderr);
}

void run_sweep_command(const SweepArgs& args) {
  analysis::SweepOptions options;
  options.scenario_file = args.scenario.file;
  options.overrides = args.scenario.overrides;
  options.database = args.database;
  options.shard = analysis::parse_shard(args.shard);
  options.jobs = std::max(1U, args.jobs);
  std::size_t skipped = 0;
  std::size_t stale = 0;
  std::size_t total = 0;
  options.progress = [&](const analysis::SweepProgress& p) {
    skipped = p.skipped;
    stale = p.stale;
    total = p.total;
    draw_progress(p);
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
  command->callback([args] { run_sweep_command(*args); });
}

}  // namespace exitsim::cli
