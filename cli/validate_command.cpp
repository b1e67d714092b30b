// `exitsim validate`: the engine against the calibrated simulator on the same requests.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "engine_model.hpp"
#include "engine_outputs.hpp"
#include "engine_run_setup.hpp"
#include "exitsim/analysis/engine_measurement.hpp"
#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/setup/policy_params.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/staged_output_directory.hpp"
#include "exitsim/traces/token_trace.hpp"
#include "output_paths.hpp"
#include "progress.hpp"
#include "validate_against.hpp"

namespace exitsim::cli {

namespace {

struct ValidateArgs {
  ModelOptions model;
  ScenarioOptions scenario;
  std::string profile;
  std::vector<std::string> strategies = {"full_depth", "depthwise"};
  std::string out = "validation";
  int repeat = 1;
  int warmup_requests = -1;
  bool normalize_speed = false;
  double speed_tolerance = 0.10;
  // --against: a serving benchmark's result replayed in the simulator (its out and scenario
  // are this command's).
  AgainstArgs against;
};

// The engine's options for a validation run: arrivals honoured, as the simulator sees them.
engine::EngineOptions measured_options(const scenario::Scenario& s,
                                       std::span<const engine::EngineRequest> requests) {
  RunArgs args;
  args.honour_arrivals = true;
  return engine_options(s, args, longest_request(requests));
}

// One engine run, measured by analysis from what the engine reported (its steps, its token trace,
// the requests it was given); the token trace is written to `token_trace_path` unless empty.
analysis::EngineMeasurement measure_engine(const LoadedModel& loaded, const scenario::Scenario& s,
                                           const engine::EngineOptions& options,
                                           const std::vector<engine::EngineRequest>& requests,
                                           const std::string& token_trace_path, double time_scale) {
  engine::Engine engine(*loaded.model, options, nullptr);
  const engine::EngineRun run = engine.run(requests);
  const std::vector<traces::TokenTraceRow> tokens = token_trace_rows(run, s.exit_policy.kind);
  if (!token_trace_path.empty())
    write_token_trace(tokens, token_trace_path);
  std::vector<analysis::EngineStep> steps;
  steps.reserve(run.steps.size());
  for (const engine::StepRecord& step : run.steps) {
    analysis::EngineStep& out = steps.emplace_back();
    out.start = step.start;
    out.idle_before = step.idle_before;
    out.requests = step.prefill;
    out.requests.insert(out.requests.end(), step.decode.begin(), step.decode.end());
    out.rows = step.rows;
  }
  std::vector<analysis::EngineRequestSent> sent;
  sent.reserve(requests.size());
  for (const engine::EngineRequest& r : requests)
    sent.push_back({r.id, r.arrival, static_cast<std::int64_t>(r.prompt.size())});
  return analysis::measure_engine_run(steps, tokens, sent, run.wall, time_scale);
}

void check_profile_matches(const ValidateArgs& args, const LoadedModel& loaded,
                           const sim::CostProfile& profile) {
  // The engine runs here: a profile of another machine or model would be validated against
  // measurements it never claimed to predict.
  if (profile.source.hardware != loaded.model->hardware()) {
    throw InputError({args.profile, 0, 0, "source.hardware"},
                     expected_found("this machine (\"" + loaded.model->hardware() + "\")",
                                    "\"" + profile.source.hardware + "\""));
  }
  if (!profile.source.build.empty() && profile.source.build != build_description()) {
    throw InputError({args.profile, 0, 0, "source.build"},
                     expected_found("this build (\"" + build_description() + "\")",
                                    "\"" + profile.source.build + "\""));
  }
  if (profile.source.model_shape != sim::model_fingerprint(loaded.config.shape)) {
    throw InputError({args.profile, 0, 0, "source.model_shape"},
                     expected_found("the model in " + args.model.dir + " (" +
                                        sim::model_fingerprint(loaded.config.shape) + ")",
                                    "\"" + profile.source.model_shape + "\""));
  }
}

// The simulator's run of the same requests, exit decisions, scheduler, memory and strategy,
// priced by the profile: its summary and iteration durations.
std::pair<sim::MetricsSummary, std::vector<TimeNs>> simulate_same(
    const ScenarioOptions& options, const ValidateArgs& args, const sim::CostProfile& profile,
    const std::string& token_trace, std::int64_t kv_blocks, double price_scale = 1.0) {
  ScenarioOptions simulated = options;
  simulated.overrides.insert(simulated.overrides.end(),
                             {"cost_model.kind=calibrated", "cost_model.profile=" + args.profile,
                              "hardware.name=\"" + profile.source.hardware + "\"",
                              "exit_policy={kind: replay, token_trace: \"" + token_trace + "\"}",
                              fmt::format("scheduler.kv_blocks={}", kv_blocks),
                              fmt::format("cost_model.price_scale={:.17g}", price_scale)});
  const scenario::Scenario sim_scenario = simulated.load();
  sim::SimulationConfig config = sim::simulation_config_from(sim_scenario, "");
  std::vector<TimeNs> iterations;
  config.iteration_observer = [&](const sim::IterationRecord& it) {
    iterations.push_back(it.duration);
  };
  const auto workload = sim::make_workload(sim_scenario.workload, sim_scenario.seed);
  const sim::SimulationResult result = sim::simulate(config, *workload);
  return {result.summary, std::move(iterations)};
}

void run_validate(const ValidateArgs& args) {
  // Every mistake the arguments can hold is refused before the folder is made.
  check_output_directory(args.out, "--out");
  for (const std::string& strategy : args.strategies)
    setup::strategy_named(strategy, "--strategies");
  const auto loaded = load_model(args.model);
  const sim::CostProfile profile = sim::CostProfile::read(args.profile);
  const std::vector<std::int32_t> corpus = args.model.corpus(loaded->config);
  // The scenario's engine section (threads, pinning, warm-up) applies before anything is timed.
  const scenario::Scenario base = with_engine_model(args.scenario, loaded->config.shape).load();
  apply_scenario_threading(args.model, base);
  check_profile_matches(args, *loaded, profile);
  const int warmup = warmup_requests(args.warmup_requests, base);
  if (args.normalize_speed && profile.source.speed_probe_us <= 0) {
    throw InputError({args.profile, 0, 0, "source.speed_probe_us"},
                     expected_found("a speed probe reading to normalize by (calibrate again "
                                    "from runs of this exitsim)",
                                    "none"));
  }
  // Written beside the folder, moved into it once validation.json is written.
  traces::StagedOutputDirectory out(args.out, "--out");
  const std::filesystem::path staging(out.staging());

  analysis::SpeedCheck speed;
  speed.calibration_us = profile.source.speed_probe_us;
  speed.tolerance = args.speed_tolerance;
  speed.start_us = engine::speed_probe(*loaded->model).median_us;
  // The end reading comes after the runs it would rescale: the start reading stands for them.
  if (args.normalize_speed) {
    speed.normalized = true;
    speed.factor = speed.calibration_us / speed.start_us;
  }

  std::vector<analysis::ValidationResult> results;
  ProgressReporter reporter("validate", "engine runs");
  const auto total_runs = static_cast<double>(args.strategies.size()) * args.repeat;
  double runs_done = 0;
  for (const std::string& strategy : args.strategies) {
    ScenarioOptions options = with_engine_model(args.scenario, loaded->config.shape);
    options.overrides.push_back("sync.strategy=" + strategy);
    const scenario::Scenario s = options.load();
    const std::vector<engine::EngineRequest> requests = engine_requests(s, corpus);
    const std::string token_trace = (staging / (strategy + "_token_trace.csv")).string();
    const engine::EngineOptions options_measured = measured_options(s, requests);
    warm_up_engine(*loaded->model, requests, options_measured, warmup);
    const sim::CalibratedCostModel priced(profile, args.profile, loaded->config.shape);
    std::vector<analysis::EngineRunMeasurement> runs;
    std::int64_t kv_blocks = 0;
    for (int k = 0; k < args.repeat; ++k) {
      // The exit decisions are the same in every run (seeded); the first run's trace is kept.
      analysis::EngineMeasurement measured = measure_engine(
          *loaded, s, options_measured, requests, k == 0 ? token_trace : "", speed.factor);
      kv_blocks = options_measured.kv_blocks;
      measured.compared.priced_steps =
          analysis::price_engine_steps(measured, priced, loaded->config.shape.depth,
                                       setup::strategy_named(strategy, "--strategies"));
      runs.push_back(std::move(measured.compared));
      reporter.update(++runs_done, total_runs, strategy);
    }
    const auto [summary, iterations] =
        simulate_same(options, args, profile, token_trace, kv_blocks);
    results.push_back(analysis::compare_runs(strategy, runs, summary, iterations));
    // How far the profile's precision alone moves each figure: the same run priced lower and
    // higher by the same-batch median error (by 1 + e either way, so that any error keeps
    // prices positive).
    // Prices off by more than 100% have no precision left to show: no band then (said below).
    const auto& same = results.back().same_batches;
    std::string no_band;
    if (same && same->median_ape > 1.0) {
      no_band = fmt::format("  no price band: the same-batch error {:.0f}% is over 100%\n",
                            100 * same->median_ape);
    } else if (same && same->median_ape > 0) {
      const double change = same->median_ape;
      const auto lower =
          simulate_same(options, args, profile, token_trace, kv_blocks, 1.0 / (1.0 + change));
      const auto upper =
          simulate_same(options, args, profile, token_trace, kv_blocks, 1.0 + change);
      analysis::add_price_band(results.back(), change, lower.first, upper.first);
    }
    fmt::print("{}{}", analysis::format_validation(std::span(&results.back(), 1)), no_band);
  }
  speed.end_us = engine::speed_probe(*loaded->model).median_us;
  fmt::print("speed      {}\n", speed.describe());
  const std::string csv = (staging / "validation.csv").string();
  traces::write_file_atomically(csv, analysis::validation_csv(results));
  const std::string json = (staging / "validation.json").string();
  const analysis::ValidationConditions conditions{
      loaded->model->hardware(), args.repeat, warmup, omp_wait_policy(), speed, std::nullopt};
  traces::write_file_atomically(json, analysis::validation_json(results, conditions));
  out.commit();
  fmt::print("wrote      {} and validation.json\n",
             (std::filesystem::path(args.out) / "validation.csv").string());
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* command = app.add_subcommand(
      "validate",
      "Run the engine on a scenario's workload, replay the same requests and exit decisions in "
      "the simulator priced by a calibrated profile, and report the error per strategy");
  args->model.add_to(*command, false);
  args->scenario.add_to(*command);
  command->add_option("--profile", args->profile,
                      "Cost profile from `exitsim calibrate` (required without --against)");
  command
      ->add_option("--strategies", args->strategies,
                   "Synchronization strategies to validate (default full_depth,depthwise)")
      ->delimiter(',');
  command->add_option("-o,--out", args->out, "Directory for validation.csv and token traces");
  command
      ->add_option("--repeat", args->repeat,
                   "Engine runs per strategy; each metric reports their min, median, max and "
                   "CV, and the simulator is judged against the median and the range (default 1)")
      ->check(CLI::Range(1, 100));
  command
      ->add_option("--warmup", args->warmup_requests,
                   "Requests decoded untimed before each strategy's runs (default 4; 0: none)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--normalize-speed", args->normalize_speed,
                    "Rescale the engine's measured times by the speed probe at calibration over "
                    "the probe now (labelled in every output)");
  command
      ->add_option("--speed-tolerance", args->speed_tolerance,
                   "Report a machine speed change beyond this fraction (default 0.10)")
      ->check(CLI::Range(0.0, 10.0));
  command
      ->add_option("--against", args->against.file,
                   "A serving benchmark's result: vLLM (`vllm bench serve --save-result`), SGLang "
                   "(`bench_serving --output-file`), GuideLLM's report or AIPerf's "
                   "profile_export.jsonl / profile_export_aiperf.json; replay its requests on the "
                   "scenario and compare the simulator with it")
      ->type_name("RESULT.json");
  command
      ->add_option("--arrival-seeds", args->against.arrival_seeds,
                   "--against: simulations, each with its own draw of the benchmark's unknown "
                   "arrival times; metrics report their median and min-max (default 5)")
      ->check(CLI::Range(1, 1000));
  command->add_flag("--ignore-max-concurrency", args->against.ignore_max_concurrency,
                    "--against: compare a benchmark run with --max-concurrency anyway (the "
                    "simulator replays an open workload; said in the output)");
  command
      ->add_option("--run", args->against.run,
                   "--against: the run of a file holding several (SGLang's JSON Lines, "
                   "GuideLLM's benchmarks), from 1 (default: the last)")
      ->check(CLI::Range(1, 1'000'000));
  command
      ->add_option("--prefix-cache", args->against.prefix_cache,
                   "--against: off (default), or warm: replay the prompts the benchmark repeated "
                   "(recognised from its input lengths) as cached, with prefix caching on")
      ->check(CLI::IsMember({"off", "warm"}));
  command
      ->add_option("--overlay", args->against.overlay,
                   "--against: scenario sections laid over the scenario (the hardware: and "
                   "cost_model: sections `calibrate --against` writes): the requests are replayed "
                   "on both, and the scenario's figures and the overlaid ones are compared side "
                   "by side")
      ->type_name("FILE");
  command->callback([args, command] {
    if (args->against.file.empty()) {
      for (const char* option : {"--arrival-seeds", "--ignore-max-concurrency", "--run",
                                 "--prefix-cache", "--overlay"}) {
        if (command->count(option) > 0) {
          throw InputError(
              {"", 0, 0, option},
              expected_found("--against (the option applies to it only)", "no --against"));
        }
      }
      for (const char* option : {"--model", "--profile"}) {
        if (command->count(option) == 0)
          throw CLI::RequiredError(option);
      }
      run_validate(*args);
      return;
    }
    // The engine does not run against a benchmark file: its options would be ignored.
    for (const char* option : {"--model", "--profile", "--strategies", "--repeat", "--warmup",
                               "--normalize-speed", "--speed-tolerance", "--exit-layers", "--text",
                               "--token-ids", "--backend", "--dtype", "--threads", "--pin"}) {
      if (command->count(option) > 0) {
        throw InputError({"", 0, 0, option},
                         expected_found("no engine option with --against (the simulator replays "
                                        "the benchmark; the engine does not run)",
                                        std::string(option)));
      }
    }
    if (args->scenario.file.empty()) {
      throw InputError({"", 0, 0, "--against"},
                       expected_found("a scenario file with it (the model, hardware and "
                                      "scheduler the benchmark ran on)",
                                      "none"));
    }
    args->against.scenario = args->scenario;
    args->against.out = args->out;
    run_validate_against(args->against);
  });
}

}  // namespace exitsim::cli
