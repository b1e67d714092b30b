#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate_against.hpp"
#include "cli_grammar.hpp"
#include "commands.hpp"
#include "exitsim/analysis/calibrate.hpp"
#include "exitsim/analysis/kernel_fit.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/traces/atomic_output.hpp"

namespace exitsim::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::vector<std::string> kineto;
  analysis::VidurInputs vidur;
  // --vidur-mlp as given: one for an import, several for --fit-hardware.
  std::vector<std::string> vidur_mlp;
  bool fit_hardware = false;
  std::string hardware;
  std::string model;
  std::string output;
  bool strict = false;
  bool force = false;
  bool tensor_parallel_given = false;
  CalibrateAgainstArgs against;
};

// Exactly one source of measurements, and only the options that source reads.
void check_sources(const CalibrateArgs& args) {
  const bool vidur = !args.vidur.mlp.empty();
  const int sources =
      (args.traces.empty() ? 0 : 1) + (args.kineto.empty() ? 0 : 1) + (vidur ? 1 : 0);
  if (sources != 1) {
    throw InputError({"", 0, 0, "OPTRACE"},
                     expected_found("exitsim op traces or grids, --kineto traces, or a --vidur-mlp "
                                    "profile",
                                    sources == 0 ? "none of them" : "more than one"));
  }
  if (!vidur) {
    for (const auto& [option, value] : {std::pair{"--vidur-attention", &args.vidur.attention},
                                        std::pair{"--vidur-all-reduce", &args.vidur.all_reduce},
                                        std::pair{"--vidur-send-recv", &args.vidur.send_recv}}) {
      if (!value->empty())
        throw InputError({"", 0, 0, option}, expected_found("--vidur-mlp beside it", "none"));
    }
    if (args.tensor_parallel_given) {
      throw InputError({"", 0, 0, "--tensor-parallel"},
                       expected_found("--vidur-mlp beside it (other measurements were taken on "
                                      "one device)",
                                      "none"));
    }
  }
  if (!args.traces.empty() && !(args.hardware.empty() && args.model.empty())) {
    throw InputError({"", 0, 0, args.hardware.empty() ? "--model-name" : "--hardware"},
                     expected_found("--kineto traces or a --vidur-mlp profile to name",
                                    "exitsim op traces, which name "
                                    "their own hardware and model"));
  }
  if (vidur && (args.hardware.empty() || args.model.empty())) {
    throw InputError(
        {"", 0, 0, args.hardware.empty() ? "--hardware" : "--model-name"},
        expected_found(args.hardware.empty() ? "the exitsim hardware preset Vidur measured on "
                                               "(a100-80gb for Vidur's a100, h100-sxm for its h100)"
                                             : "the exitsim model preset Vidur's profile is of",
                       "none"));
  }
}

// --fit-hardware: the roofline's kernel corrections fitted to Vidur-format profiles of one GPU,
// written as a scenario's hardware section (docs/calibration.md, "Fit the kernel corrections").
void run_fit_hardware(const CalibrateArgs& args) {
  if (args.output.empty())
    throw InputError({"", 0, 0, "--out"}, "expected the hardware section to write, found none");
  if (!args.traces.empty() || !args.kineto.empty()) {
    throw InputError({"", 0, 0, "--fit-hardware"},
                     expected_found("Vidur-format profiles (--vidur-mlp, --vidur-attention, "
                                    "--vidur-all-reduce, --vidur-send-recv)",
                                    "op traces or --kineto traces"));
  }
  if (!args.model.empty() || args.tensor_parallel_given) {
    throw InputError({"", 0, 0, args.model.empty() ? "--tensor-parallel" : "--model-name"},
                     expected_found("none with --fit-hardware (it reads every model and TP "
                                    "degree the files hold)",
                                    "one"));
  }
  const std::optional<HardwareSpec> base = find_hardware_preset(args.hardware);
  if (!base) {
    throw InputError({"", 0, 0, "--hardware"},
                     expected_found(fmt::format("the hardware preset to fit ({})",
                                                fmt::join(hardware_preset_names(), ", ")),
                                    args.hardware.empty() ? "none" : "'" + args.hardware + "'"));
  }
  analysis::gpu_fidelity::ProfileFiles files;
  files.mlp = args.vidur_mlp;
  if (!args.vidur.attention.empty())
    files.attention.push_back(args.vidur.attention);
  files.all_reduce = args.vidur.all_reduce;
  files.send_recv = args.vidur.send_recv;
  if (files.mlp.empty() && files.attention.empty() && files.all_reduce.empty() &&
      files.send_recv.empty()) {
    throw InputError({"", 0, 0, "--fit-hardware"},
                     expected_found("at least one Vidur-format file to fit", "none"));
  }
  const analysis::KernelFit fit = analysis::fit_kernel_corrections(files, *base);
  traces::write_file_atomically(args.output,
                                analysis::kernel_corrections_yaml(fit, base->name, files));
  for (const std::string& line : fit.report)
    fmt::print("fit        {}\n", line);
  fmt::print("wrote      {} (a scenario's hardware: section on the {} preset)\n", args.output,
             base->name);
}

void run_calibrate(CalibrateArgs args) {
  if (args.fit_hardware) {
    run_fit_hardware(args);
    return;
  }
  if (args.vidur_mlp.size() > 1) {
    throw InputError({"", 0, 0, "--vidur-mlp"},
                     expected_found("one mlp.csv to import (several only with --fit-hardware)",
                                    fmt::format("{}", args.vidur_mlp.size())));
  }
  if (!args.vidur_mlp.empty())
    args.vidur.mlp = args.vidur_mlp.front();
  if (args.output.empty())
    throw InputError({"", 0, 0, "--out"}, "expected the cost profile to write, found none");
  check_sources(args);
  std::vector<std::string> import_report;
  sim::CostProfile profile;
  std::string first_input;
  if (!args.traces.empty()) {
    profile = analysis::calibrate(args.traces);
    first_input = args.traces.front();
  } else if (!args.kineto.empty()) {
    analysis::KinetoCalibration imported =
        analysis::calibrate_kineto(args.kineto, {args.hardware, args.model});
    profile = std::move(imported.profile);
    import_report = std::move(imported.report);
    first_input = args.kineto.front();
  } else {
    analysis::VidurInputs inputs = args.vidur;
    inputs.hardware = args.hardware;
    inputs.model = args.model;
    analysis::VidurCalibration imported = analysis::calibrate_vidur(inputs);
    profile = std::move(imported.profile);
    import_report = std::move(imported.report);
    first_input = inputs.mlp;
  }
  const std::vector<std::string> absurd = analysis::absurd_fits(profile);
  if (!absurd.empty() && !args.force) {
    throw InputError(
        {first_input, 0, 0,
         !args.kineto.empty() ? "dur" : (args.traces.empty() ? "median" : "duration_ns")},
        fmt::format("expected timings of one steady machine, found {} fits whose held-out calls "
                    "miss by far ({}): the machine was busy or its speed changed; measure again "
                    "on a quiet machine with `--threads 1 --pin` (--force writes the profile "
                    "anyway); no profile written",
                    absurd.size(), absurd.front()));
  }
  const std::vector<std::string> untrusted = analysis::untrusted_fits(profile);
  if (args.strict && !untrusted.empty()) {
    throw InputError(
        {first_input, 0, 0, "--strict"},
        fmt::format("expected fits within {:.0f}% held-out error on at least {} "
                    "calls each, found {} that are not ({}); no profile written",
                    100 * analysis::k_untrusted_held_out_mape, analysis::k_min_trusted_samples,
                    untrusted.size(), untrusted.front()));
  }
  profile.write(args.output);
  fmt::print("source     {} {} on {}, model {} ({}){}\n", profile.source.engine,
             profile.source.backend, profile.source.hardware, profile.source.model,
             profile.source.model_shape,
             profile.source.tensor_parallel > 1
                 ? fmt::format(", one GPU of {} (tensor parallel)", profile.source.tensor_parallel)
                 : "");
  if (!profile.source.build.empty())
    fmt::print("build      {}\n", profile.source.build);
  for (const std::string& line : import_report)
    fmt::print("{}\n", line);
  if (profile.source.speed_probe_us > 0)
    fmt::print("speed      probe {:.1f} us (mean of the runs' readings)\n",
               profile.source.speed_probe_us);
  fmt::print("{:<26} {:>8} {:>6} {:>5} {:>7} {:>8} {:>13} {:>12} {:>13} {:>14}\n", "op", "from",
             "fitted", "held", "regimes", "fit MAPE", "held-out MAPE", "held-out p50", "in engine",
             "measured up to");
  for (const sim::OpFit& op : profile.ops) {
    const std::string in_situ =
        op.in_situ_median_ape >= 0
            ? fmt::format("x{:.2f} {:.1f}%", op.in_situ_scale, 100 * op.in_situ_median_ape)
            : "-";
    fmt::print("{:<26} {:>8} {:>6} {:>5} {:>7} {:>7.1f}% {:>12.1f}% {:>11.1f}% {:>13} {:>14}\n",
               op.name, op.measured_by, op.samples, op.held_out, op.regimes.size(),
               100 * op.fit_mape, 100 * op.held_out_mape, 100 * op.held_out_median_ape, in_situ,
               fmt::format("B {} C {}", op.batch_max_seen, op.context_max_seen));
  }
  if (!profile.step_variability.empty()) {
    const std::vector<double>& q = profile.step_variability;
    fmt::print(
        "steps      measured / priced: p5 {:.3f}, p25 {:.3f}, median {:.3f}, p75 {:.3f}, "
        "p95 {:.3f} (cost_model.step_variability: true draws each simulated iteration's factor "
        "from it)\n",
        q[1], q[5], q[10], q[15], q[19]);
  }
  if (profile.find("step.residual") == nullptr) {
    fmt::print(
        "WARNING    no op trace given: the step residual (scheduling, policy work, gaps) is not "
        "measured and simulations price it as 0\n");
  }
  std::string from_roofline;
  for (const sim::OpFit& op : profile.ops) {
    if (op.measured_by == "roofline")
      from_roofline += (from_roofline.empty() ? "" : ", ") + op.name;
  }
  if (!from_roofline.empty()) {
    fmt::print(
        "NOTE       not measured, fitted to exitsim's roofline ({}): {}; simulations say so\n",
        profile.source.hardware, from_roofline);
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
      "Fit a latency model per engine op from op traces (`exitsim engine run --profile-dir DIR` "
      "writes DIR/op_trace.csv and DIR/run.json) and op grids (`exitsim engine profile-ops -o "
      "ops.csv`), from PyTorch-profiler traces (--kineto), or from Vidur's public GPU profiles "
      "(--vidur-mlp), into a cost profile for cost_model.kind: calibrated");
  command
      ->add_option("OPTRACE", args->traces,
                   "Op traces (op_trace.csv, with run.json beside) and op grids (with "
                   "<name>.run.json beside)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--kineto", args->kineto,
                   "PyTorch-profiler traces to calibrate from instead (torch.profiler with "
                   "record_shapes=True, one prof.step() per model step or the framework's own "
                   "step ranges, as vLLM and SGLang write them; .json or .json.gz; "
                   "docs/calibration.md)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--vidur-mlp", args->vidur_mlp,
                   "A Vidur profile to import instead: its mlp.csv (per-op GPU times of one "
                   "layer by tokens and TP degree; github.com/microsoft/vidur, "
                   "data/profiling/compute/<gpu>/<model>/mlp.csv; docs/calibration.md)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--vidur-attention", args->vidur.attention,
                   "With --vidur-mlp: Vidur's attention.csv of the same model (default: attention "
                   "fitted to the roofline's prices)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--vidur-all-reduce", args->vidur.all_reduce,
                   "With --vidur-mlp: Vidur's all_reduce.csv (network/<node>/all_reduce.csv) for "
                   "the TP all-reduces (default: priced by the roofline when simulating)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--vidur-send-recv", args->vidur.send_recv,
                   "With --vidur-mlp: Vidur's send_recv.csv for the pipeline's hand-offs "
                   "(default: priced by the roofline when simulating)")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--tensor-parallel", args->vidur.tensor_parallel,
                   "With --vidur-mlp: the tensor-parallel degree whose rows to import (default 1); "
                   "the profile prices scenarios of this parallel.tensor")
      ->each([args](const std::string&) { args->tensor_parallel_given = true; });
  command->add_option("--hardware", args->hardware,
                      "With --kineto: the device the traces ran on (default: the trace's "
                      "exitsim_hardware key, else its first GPU's name). With --vidur-mlp "
                      "(required): the exitsim hardware preset Vidur measured on (a100-80gb for "
                      "Vidur's a100, h100-sxm for its h100)");
  command->add_option("--model-name", args->model,
                      "With --kineto: the model's name in the profile (default: the first "
                      "trace's file name). With --vidur-mlp (required): the exitsim model preset "
                      "of the profile's shape (e.g. llama-2-7b)");
  command->add_flag(
      "--fit-hardware", args->fit_hardware,
      "Fit the roofline's kernel corrections of the --hardware preset (min kernel "
      "time, ridge, element-wise and attention terms, collective and send latency "
      "and bandwidth) to Vidur-format profiles of one GPU (--vidur-mlp, repeatable "
      "here, --vidur-attention, --vidur-all-reduce, --vidur-send-recv) and write them "
      "as a scenario's hardware: section (YAML) to --out");
  command->add_option("-o,--out", args->output,
                      "The cost profile to write (JSON; required); with --fit-hardware and "
                      "--against the hardware section (YAML)");
  add_renamed_option(*command, "--output", "-o/--out", args->output);
  command->add_flag("--strict", args->strict,
                    "Refuse (exit 1, no profile) when a fit is not to trust: held-out error over "
                    "25%, fewer than 10 calls, or a regime priced as its calls' mean");
  command->add_flag("--force", args->force,
                    "Write the profile even when fits say the machine was not steady (a grid "
                    "fit's held-out median error over 50%, any fit's mean over 1000%)");
  add_calibrate_against_options(*command, args->against);
  command->callback([args, command] {
    if (args->against.results.empty()) {
      refuse_calibrate_against_options_alone(*command);
      run_calibrate(*args);
      return;
    }
    // The benchmark runs are the fit's one source: another source's option would be ignored.
    for (const char* option :
         {"OPTRACE", "--kineto", "--vidur-mlp", "--vidur-attention", "--vidur-all-reduce",
          "--vidur-send-recv", "--tensor-parallel", "--hardware", "--model-name", "--fit-hardware",
          "--strict", "--force"}) {
      if (command->count(option) > 0) {
        throw InputError({"", 0, 0, option},
                         expected_found("no other source's option with --against (the fit "
                                        "reads the benchmark runs and --scenario alone)",
                                        std::string(option)));
      }
    }
    run_calibrate_against(args->against, args->output);
  });
}

}  // namespace exitsim::cli
