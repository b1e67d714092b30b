// `exitsim engine run` and `exitsim engine eval`: the real engine on a model directory.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <utility>

#include "cli_grammar.hpp"
#include "commands.hpp"
#include "engine_eval.hpp"
#include "engine_model.hpp"
#include "engine_outputs.hpp"
#include "engine_run_setup.hpp"
#include "exitsim/core/dtype.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/setup/policy_params.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/chrome_trace.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/staged_output_directory.hpp"
#include "exitsim/traces/token_trace.hpp"
#include "output_paths.hpp"
#include "progress.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {
namespace {

void run_engine(const RunArgs& args) {
  // Both folders are checked before the run: a file in the way used to be an internal error
  // after the token trace was already written.
  if (!args.no_output && !args.out.empty())
    check_output_directory(args.out, "--out");
  if (!args.profile.empty())
    check_output_directory(args.profile, "--profile-dir");
  const auto loaded = load_model(args.model);
  const scenario::Scenario s = with_engine_model(args.scenario, loaded->config.shape).load();
  apply_scenario_threading(args.model, s);
  const int warmup = warmup_requests(args.warmup_requests, s);
  const std::vector<engine::EngineRequest> requests =
      engine_requests(s, args.model.corpus(loaded->config));
  const std::int64_t longest = longest_request(requests);
  profiler::HostProfiler profiler(profiler::HostProfilerOptions{.enabled = !args.profile.empty()});
  engine::EngineOptions options = engine_options(s, args, longest);
  if (s.scheduler.kv_blocks == 0) {
    // No device memory to size from on the CPU: the substituted size is said, not silent.
    fmt::print(
        "kv memory  {} blocks of {} tokens (scheduler.kv_blocks 0: room for "
        "min(max_running, 64) sequences of the longest request, {} tokens)\n",
        options.kv_blocks, options.block_size, longest);
  }
  RunConditions conditions;
  conditions.warmup_requests = warmup;
  conditions.omp_wait_policy = omp_wait_policy();
  warm_up_engine(*loaded->model, requests, options, warmup);
  if (!args.profile.empty())
    conditions.probe_start = engine::speed_probe(*loaded->model);
  // Progress in output tokens, set after the warm-up (which runs without observers).
  std::int64_t total_tokens = 0;
  for (const engine::EngineRequest& r : requests)
    total_tokens += r.output_tokens;
  ProgressReporter reporter("engine run", "output tokens");
  std::int64_t emitted = 0;
  options.step_observer = [&](const policy::StepTrace& step) {
    for (const policy::StepRow& row : step.rows)
      emitted += row.emits ? 1 : 0;
    reporter.update(static_cast<double>(emitted), static_cast<double>(total_tokens));
  };
  engine::Engine engine(*loaded->model, options, args.profile.empty() ? nullptr : &profiler);
  DeviceTrace device_trace(loaded->cuda, args.profile.empty() ? nullptr : &profiler);
  const engine::EngineRun run = engine.run(requests);
  reporter.finish();
  std::vector<traces::OpTraceRow> device_rows = device_trace.take();
  if (!args.profile.empty())
    conditions.probe_end = engine::speed_probe(*loaded->model);

  std::int64_t tokens = 0;
  std::map<int, std::int64_t> exits;
  double depth = 0;
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.discarded)
      continue;
    ++tokens;
    ++exits[t.exit_depth];
    depth += t.exit_depth;
  }
  const double seconds = static_cast<double>(run.wall) / 1e9;
  fmt::print("model      {} ({} layers executed at full depth), strategy {}, exit policy {}\n",
             loaded->config.shape.name, loaded->model->executed_layers(), s.sync.strategy,
             s.exit_policy.kind);
  fmt::print(
      "requests   {} in {:.3f} s: {} output tokens, {:.1f} tokens/s, {} iterations, "
      "{} preemptions\n",
      requests.size(), seconds, tokens, static_cast<double>(tokens) / seconds, run.iterations,
      run.preemptions);
  if (s.scheduler.preemption == "swap") {
    fmt::print(
        "swap       {} victims to the host tier of {} blocks ({} blocks out, {} back), {} "
        "recomputed instead (tier full: hardware.host_swap_gb)\n",
        run.swaps.swapped_out, options.host_kv_blocks, run.swaps.swapped_out_blocks,
        run.swaps.swapped_in_blocks, run.swaps.recomputed_instead);
  }
  fmt::print("depth      mean exit depth {:.2f} stack layers; tokens by exit depth {}\n",
             depth / static_cast<double>(std::max<std::int64_t>(tokens, 1)), exits);
  if (run.filled_states > 0) {
    fmt::print("fill       {} pending states filled", run.filled_states);
    if (args.rollback) {
      fmt::print(
          "; {} disagreed with the full depth ({:.1f}%), {} tokens rolled back", run.disagreements,
          100.0 * static_cast<double>(run.disagreements) / static_cast<double>(run.filled_states),
          run.rolled_back_tokens);
    }
    fmt::print("\n");
  }
  const bool adaptive = s.exit_policy.kind == "adaptive_threshold";
  if (adaptive)
    print_threshold_summary(run, options.exit_policy.threshold, options.strategy);
  if (args.no_output)
    return;
  const std::string out = args.out.empty() ? s.outputs.dir : args.out;
  check_output_directory(out, "outputs.dir");
  // Both folders are written beside their place and moved in once every file is written.
  // One folder for both when --profile names the output folder itself.
  // Two paths that cannot be resolved are not taken for one (both would read as empty).
  std::error_code profile_error;
  std::error_code out_error;
  const bool profile_in_out = !args.profile.empty() &&
                              std::filesystem::weakly_canonical(args.profile, profile_error) ==
                                  std::filesystem::weakly_canonical(out, out_error) &&
                              !profile_error && !out_error;
  std::optional<traces::StagedOutputDirectory> profile_dir;
  if (!args.profile.empty() && !profile_in_out)
    profile_dir.emplace(args.profile, "--profile-dir");
  traces::StagedOutputDirectory out_dir(out, args.out.empty() ? "outputs.dir" : "--out");
  write_token_trace(token_trace_rows(run, s.exit_policy.kind),
                    (std::filesystem::path(out_dir.staging()) / "token_trace.csv").string());
  if (adaptive) {
    write_threshold_trajectory(
        run.threshold_trajectory,
        (std::filesystem::path(out_dir.staging()) / "threshold_trajectory.csv").string());
  }
  const std::size_t ops = profiler.size() + device_rows.size();
  if (!args.profile.empty()) {
    write_profile(profiler, run, *loaded->model,
                  profile_dir ? profile_dir->staging() : out_dir.staging(), conditions,
                  std::move(device_rows));
  }
  if (profile_dir)
    profile_dir->commit();
  out_dir.commit();
  fmt::print("wrote      {}/token_trace.csv{}\n", out,
             adaptive ? fmt::format(" and {}/threshold_trajectory.csv", out) : "");
  if (!args.profile.empty()) {
    fmt::print("speed      probe {:.1f} us before the run, {:.1f} us after ({:+.1f}%)\n",
               conditions.probe_start.median_us, conditions.probe_end.median_us,
               100 * (conditions.probe_end.median_us / conditions.probe_start.median_us - 1));
    fmt::print(
        "profile    {} ops in {}/op_trace.csv and op_trace.json, their requests per step "
        "in steps.csv\n",
        ops, args.profile);
    if (!device_trace.summary().empty())
      fmt::print("cupti      {}\n", device_trace.summary());
  }
}

struct RandomModelArgs {
  std::string out;
  std::string like = "tiny-recursive";
  std::uint64_t seed = 1;
  std::string dtype = "fp32";
};

// The shape of the tiny recursive model the project ships: byte vocabulary, one prelude and one
// coda layer around a one-layer block applied four times.
ModelShape tiny_recursive_shape() {
  ModelShape m;
  m.name = "tiny-recursive";
  m.d_model = 192;
  m.n_heads = 6;
  m.n_kv_heads = 2;
  m.head_dim = 32;
  m.ffn_dim = 512;
  m.vocab = 260;
  m.tied_embeddings = true;
  m.depth.prelude_layers = 1;
  m.depth.block_layers = 1;
  m.depth.recursions = 4;
  m.depth.coda_layers = 1;
  return m;
}

void write_random_model(const RandomModelArgs& args) {
  engine::ModelConfig config;
  if (args.like == "tiny-recursive") {
    config.shape = tiny_recursive_shape();
  } else if (const auto preset = find_model_preset(args.like)) {
    config.shape = *preset;
    config.tokenizer = engine::TokenizerKind::ids;
  } else {
    std::vector<std::string> names = model_preset_names();
    names.insert(names.begin(), "tiny-recursive");
    throw InputError({"", 0, 0, "--like"}, expected_found(one_of(names), "\"" + args.like + "\""));
  }
  config.shape.name = "random-" + config.shape.name;
  config.shape.dtype = DType::fp32;
  config.routers = config.shape.depth.recursions > 0;
  const auto dtype = parse_dtype(args.dtype);
  if (!dtype || (*dtype != DType::fp32 && *dtype != DType::fp16 && *dtype != DType::bf16)) {
    throw InputError({"", 0, 0, "--dtype"}, expected_found("fp32, fp16 or bf16", args.dtype));
  }
  engine::validate_model_config(config);
  const engine::ModelWeights weights = engine::random_model_weights(config, args.seed);
  engine::save_model(args.out, config, weights, *dtype);
  fmt::print("wrote {} ({} parameters, {}) to {}\n", config.shape.name,
             config.shape.parameter_count(), args.dtype, args.out);
}

}  // namespace

void add_engine_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("engine", "Run the real inference engine on a model");
  group->require_subcommand(1);

  auto run_args = std::make_shared<RunArgs>();
  CLI::App* run = group->add_subcommand(
      "run",
      "Decode a scenario's workload with the CPU engine (its exit policy, strategy and "
      "scheduler), writing the token trace and, with --profile-dir, the op trace");
  run_args->model.add_to(*run);
  run_args->scenario.add_to(*run);
  run->add_option("-o,--out", run_args->out, "Output directory (default: outputs.dir)");
  run->add_flag("--no-output", run_args->no_output, "Print the summary only; write no files");
  run->add_option("--profile-dir", run_args->profile,
                  "Folder to write the op trace (CSV and Chrome JSON), steps and run.json to");
  add_renamed_option(*run, "--profile", "--profile-dir", run_args->profile);
  run->add_flag("--honour-arrivals", run_args->honour_arrivals,
                "Wait for each request's arrival time instead of taking all at once");
  run->add_flag("--rollback", run_args->rollback,
                "deferred_fill: replace a filled token whose full-depth prediction disagrees, "
                "discarding what followed it; the disagreement rate calibrates "
                "sync.rollback_probability");
  run->add_option("--temperature", run_args->temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--warmup", run_args->warmup_requests,
                  "Requests decoded untimed before the measured run (default: the scenario's "
                  "engine.warmup_requests, 4; 0: none)")
      ->check(CLI::NonNegativeNumber);
  run->callback([run_args] { run_engine(*run_args); });

  auto eval_args = std::make_shared<EvalArgs>();
  CLI::App* eval = group->add_subcommand(
      "eval",
      "Measure quality per exit setting on an evaluation text: NLL, top-1 agreement with "
      "full depth, exit distribution, mean depth (the quality table)");
  eval_args->model.add_to(*eval);
  eval->add_option("--thresholds", eval_args->thresholds, "Confidence thresholds, e.g. 0.5,0.9")
      ->delimiter(',');
  eval->add_option("--measure", eval_args->measure, "Confidence measure")
      ->check(CLI::IsMember({"top1", "margin"}));
  eval->add_option("--adaptive-thresholds", eval_args->adaptive_thresholds,
                   "Initial thresholds of adaptive_threshold (FREE) settings, each measured "
                   "under deferred_fill with the estimator's defaults")
      ->delimiter(',');
  eval->add_option("--router-thresholds", eval_args->router_thresholds,
                   "Expert-choice router score thresholds")
      ->delimiter(',');
  eval->add_flag("--token-choice", eval_args->token_choice,
                 "Also measure router_token_choice (models with routers)");
  eval->add_flag("--oracle", eval_args->oracle,
                 "Also measure the oracle: each token's earliest exit agreeing with full depth");
  eval->add_option("--strategies", eval_args->strategies,
                   "Synchronization strategies to measure every setting under, e.g. "
                   "skip_kv,state_copy (default: skip_kv on recursive models, else state_copy)")
      ->delimiter(',');
  eval->add_option("--context", eval_args->options.context, "Prompt tokens per window")
      ->check(CLI::PositiveNumber);
  eval->add_option("--window", eval_args->options.window, "Scored tokens per window")
      ->check(CLI::PositiveNumber);
  eval->add_option("--max-windows", eval_args->options.max_windows, "Windows at most (0: all)");
  eval->add_option("--out,-o", eval_args->out, "Write the quality table here");
  eval->add_option("--calibration-table", eval_args->calibration_table,
                   "Also write the calibration table (per exit point: confidence bins and how "
                   "often the prediction there is the full-depth one) here");
  eval->callback([eval_args] { run_eval(*eval_args); });

  auto random_args = std::make_shared<RandomModelArgs>();
  CLI::App* random =
      group->add_subcommand("random-model",
                            "Write a model directory with deterministic random weights (for tests, "
                            "benchmarks and device checks of a model shape)");
  random->add_option("--out,-o", random_args->out, "Model directory to write")->required();
  random->add_option("--like", random_args->like,
                     "tiny-recursive, or a model preset (e.g. mor-smollm-360m-r3)");
  random->add_option("--seed", random_args->seed, "Seed of the weights");
  random->add_option("--dtype", random_args->dtype, "Stored dtype: fp32, fp16 or bf16");
  random->callback([random_args] { write_random_model(*random_args); });

  add_profile_ops_command(*group);
}

}  // namespace exitsim::cli
