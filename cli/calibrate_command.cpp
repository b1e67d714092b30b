#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exitsim/analysis/calibrate.hpp"

namespace exitsim::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::string output;
};

void run_calibrate(const CalibrateArgs& args) {
  const sim::CostProfile profile = analysis::calibrate(args.traces);
  profile.write(args.output);
  fmt::print("source     {} {} on {}, model {} ({})\n", profile.source.engine,
             profile.source.backend, profile.source.hardware, profile.source.model,
             profile.source.model_shape);
  fmt::print("{:<20} {:>7} {:>7} {:>8} {:>9} {:>12}\n", "op", "fitted", "held", "regimes",
             "fit MAPE", "held-out MAPE");
  for (const sim::OpFit& op : profile.ops) {
    fmt::print("{:<20} {:>7} {:>7} {:>8} {:>8.1f}% {:>11.1f}%\n", op.name, op.samples, op.held_out,
               op.regimes.size(), 100 * op.fit_mape, 100 * op.held_out_mape);
  }
  fmt::print("wrote      {}\n", args.output);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* command = app.add_subcommand(
      "calibrate",
      "Fit a latency model per engine op from op traces (`exitsim engine run --profile DIR` "
      "writes DIR/op_trace.csv and DIR/run.json) into a cost profile for cost_model.kind: "
      "calibrated");
  command->add_option("OPTRACE", args->traces, "Op traces (op_trace.csv, with run.json beside)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("-o,--output", args->output, "The cost profile to write (JSON)")->required();
  command->callback([args] { run_calibrate(*args); });
}

}  // namespace exitsim::cli
