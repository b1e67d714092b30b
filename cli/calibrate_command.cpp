#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::string output;
  bool strict = false;
};

void run_calibrate(const CalibrateArgs& args) {
  const sim::CostProfile profile = analysis::calibrate(args.traces);
  const std::vector<std::string> untrusted = analysis::untrusted_fits(profile);
  if (args.strict && !untrusted.empty()) {
    throw InputError(
        {args.traces.front(), 0, 0, "--strict"},
        fmt::format("expected fits within {:.0f}% held-out error on at least {} "
                    "calls each, found {} that are not ({}); no profile written",
                    100 * analysis::k_untrusted_held_out_mape, analysis::k_min_trusted_samples,
                    untrusted.size(), untrusted.front()));
  }
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
  for (const std::string& line : untrusted)
    fmt::print("WARNING    fit not to trust: {}\n", line);
  if (!untrusted.empty()) {
    fmt::print(
        "WARNING    {} fits above; simulations with this profile price those ops "
        "unreliably (--strict refuses such a profile)\n",
        untrusted.size());
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
  command->add_flag("--strict", args->strict,
                    "Refuse (exit 1, no profile) when a fit is not to trust: held-out error over "
                    "25%, fewer than 10 calls, or a regime priced as its calls' mean");
  command->callback([args] { run_calibrate(*args); });
}

}  // namespace exitsim::cli
