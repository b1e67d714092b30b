// `exitsim engine run` and `exitsim engine eval`: the real engine on a model directory.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "exitsim/core/dtype.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/engine/quality_eval.hpp"
#include "exitsim/engine/quality_table.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/policy_params.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/chrome_trace.hpp"
#include "exitsim/traces/op_trace.hpp"
#include "exitsim/traces/token_trace.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {
namespace {

// The model and the text its prompts (or evaluation windows) come from.
struct ModelOptions {
  std::string dir;
  std::vector<int> exit_layers;
  std::string text;
  std::string token_ids;

  void add_to(CLI::App& command) {
    command.add_option("--model", dir, "Model directory (exitsim.json or a Hugging Face Llama)")
        ->required();
    command
        .add_option("--exit-layers", exit_layers,
                    "Exit points of a plain model (layers, ascending), e.g. 8,16,24")
        ->delimiter(',');
    command.add_option("--text", text, "Text the prompts come from (byte-level models)");
    command.add_option("--token-ids", token_ids,
                       "Token-id file the prompts come from (one document per line)");
  }

  std::vector<std::int32_t> corpus(const engine::ModelConfig& config) const {
    if (!text.empty() && !token_ids.empty()) {
      throw InputError({"", 0, 0, "--text"}, "give --text or --token-ids, not both");
    }
    if (!token_ids.empty()) {
      std::vector<std::int32_t> all;
      for (const auto& document : engine::read_token_id_file(token_ids, config.shape.vocab))
        all.insert(all.end(), document.begin(), document.end());
      return all;
    }
    if (text.empty()) {
      throw InputError({"", 0, 0, "--text"},
                       "expected --text FILE (or --token-ids FILE) for the model's prompts");
    }
    if (config.tokenizer != engine::TokenizerKind::bytes) {
      throw InputError(
          {config.config_file, 0, 0, "tokenizer"},
          "this model's tokenizer is not run here: give --token-ids instead of --text");
    }
    return engine::ByteTokenizer{}.encode(engine::read_text_file(text));
  }
};

struct LoadedModel {
  engine::ModelConfig config;
  engine::ModelWeights weights;
  std::unique_ptr<engine::CpuModel> model;
};

std::unique_ptr<LoadedModel> load_model(const ModelOptions& options) {
  auto loaded = std::make_unique<LoadedModel>();
  loaded->config = engine::load_model_config(options.dir, options.exit_layers);
  loaded->weights = engine::load_model_weights(loaded->config);
  loaded->model = std::make_unique<engine::CpuModel>(loaded->config, loaded->weights);
  return loaded;
}

policy::SyncStrategy strategy_named(const std::string& name, const std::string& field) {
  const auto strategy = policy::parse_sync_strategy(name);
  if (!strategy) {
    throw InputError({"", 0, 0, field},
                     expected_found(one_of(policy::sync_strategy_names()), "\"" + name + "\""));
  }
  return *strategy;
}

struct RunArgs {
  ModelOptions model;
  ScenarioOptions scenario;
  std::string out;
  std::string profile;
  bool no_output = false;
  bool honour_arrivals = false;
  bool rollback = false;
  double temperature = 0;
};

std::vector<engine::EngineRequest> engine_requests(const scenario::Scenario& s,
                                                   const std::vector<std::int32_t>& corpus) {
  const auto workload = sim::make_workload(s.workload, s.seed);
  const engine::PromptSource prompts(corpus, s.seed);
  std::vector<engine::EngineRequest> requests;
  while (auto descriptor = workload->next()) {
    engine::EngineRequest r;
    r.id = descriptor->id;
    r.arrival = descriptor->arrival.value_or(0);
    r.prompt = prompts.prompt(descriptor->id, descriptor->input_tokens);
    r.output_tokens = descriptor->output_tokens;
    requests.push_back(std::move(r));
  }
  return requests;
}

engine::EngineOptions engine_options(const scenario::Scenario& s, const RunArgs& args,
                                     std::int64_t longest) {
  engine::EngineOptions o;
  o.scheduler = s.scheduler.kind;
  o.limits.max_running = s.scheduler.max_running;
  o.limits.max_batched_tokens = s.scheduler.max_batched_tokens;
  o.block_size = s.scheduler.block_size;
  // No device memory to size from on the CPU: room for max_running of the longest request.
  const std::int64_t per_sequence = (longest + o.block_size - 1) / o.block_size;
  o.kv_blocks = s.scheduler.kv_blocks > 0
                    ? s.scheduler.kv_blocks
                    : per_sequence * std::min<std::int64_t>(s.scheduler.max_running, 64);
  o.exit_policy = sim::exit_policy_params(s.exit_policy);
  o.strategy = strategy_named(s.sync.strategy, "sync.strategy");
  o.depthwise = sim::depthwise_rule(s.sync);
  o.temperature = args.temperature;
  o.seed = s.seed;
  o.honour_arrivals = args.honour_arrivals;
  if (s.sync.rollback_probability > 0) {
    throw InputError({"", 0, 0, "sync.rollback_probability"},
                     "the engine measures disagreement instead of drawing it: set 0 and pass "
                     "--rollback");
  }
  o.rollback = args.rollback;
  return o;
}

// steps.csv: the requests of every engine step, so each op of the op trace (by its step id)
// maps to the requests it served.
void write_steps(const engine::EngineRun& run, const std::string& path) {
  traces::detail::AtomicOutputFile file(path);
  file.write("step_id,start_ns,prefill_request_ids,decode_request_ids\n");
  const auto ids = [](const std::vector<RequestId>& requests) {
    std::string out;
    for (const RequestId id : requests)
      out += (out.empty() ? "" : ";") + std::to_string(id.value);
    return out;
  };
  for (const engine::StepRecord& step : run.steps) {
    file.write(
        fmt::format("{},{},{},{}\n", step.step, step.start, ids(step.prefill), ids(step.decode)));
  }
  file.finish();
}

// run.json: what produced the trace, so that a profile calibrated from it prices only this
// engine, backend, hardware and model (docs/calibration.md).
void write_run_description(const engine::Backend& backend, const std::string& dir) {
  const ModelShape& shape = backend.config().shape;
  const nlohmann::json run = {{"engine", "exitsim-engine"},
                              {"backend", backend.name()},
                              {"hardware", backend.hardware()},
                              {"model", shape.name},
                              {"model_shape", sim::model_fingerprint(shape)}};
  traces::write_file_atomically((std::filesystem::path(dir) / "run.json").string(),
                                run.dump(2) + "\n");
}

void write_profile(const profiler::HostProfiler& profiler, const engine::EngineRun& run,
                   const engine::Backend& backend, const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_run_description(backend, dir);
  write_steps(run, (std::filesystem::path(dir) / "steps.csv").string());
  const std::string csv = (std::filesystem::path(dir) / "op_trace.csv").string();
  {
    traces::OpTraceWriter writer(csv);
    profiler.write(writer);
    writer.finish();
  }
  traces::OpTraceReader reader(csv);
  traces::ChromeTraceWriter chrome((std::filesystem::path(dir) / "op_trace.json").string(),
                                   {256LL << 20});
  traces::write_op_trace_as_chrome(reader, chrome);
  chrome.finish();
}

// The scenario's model section made to describe the engine's model, so that the scenario's exit
// policy is validated against the exit points the engine really has. The user's --set come
// after and win.
ScenarioOptions with_engine_model(const ScenarioOptions& options, const ModelShape& m) {
  const DepthStructure& d = m.depth;
  ScenarioOptions out = options;
  const std::vector<std::string> model = {
      "model.preset=null",
      "model.name=" + m.name,
      fmt::format("model.d_model={}", m.d_model),
      fmt::format("model.n_heads={}", m.n_heads),
      fmt::format("model.n_kv_heads={}", m.n_kv_heads),
      fmt::format("model.head_dim={}", m.head_dim),
      fmt::format("model.ffn_dim={}", m.ffn_dim),
      fmt::format("model.vocab={}", m.vocab),
      fmt::format("model.tied_embeddings={}", m.tied_embeddings),
      fmt::format("model.depth.prelude={}", d.prelude_layers),
      fmt::format("model.depth.block={}", d.block_layers),
      fmt::format("model.depth.recursions={}", d.recursions),
      fmt::format("model.depth.coda={}", d.coda_layers),
      fmt::format("model.depth.lora_rank=[{}]", fmt::join(d.lora_rank, ", ")),
      fmt::format("model.depth.exit_points=[{}]", fmt::join(d.exit_points, ", "))};
  out.overrides.insert(out.overrides.begin(), model.begin(), model.end());
  return out;
}

void run_engine(const RunArgs& args) {
  const auto loaded = load_model(args.model);
  const scenario::Scenario s = with_engine_model(args.scenario, loaded->config.shape).load();
  const std::vector<engine::EngineRequest> requests =
      engine_requests(s, args.model.corpus(loaded->config));
  std::int64_t longest = 1;
  for (const engine::EngineRequest& r : requests) {
    longest = std::max(longest, static_cast<std::int64_t>(r.prompt.size()) + r.output_tokens);
  }
  profiler::HostProfiler profiler(profiler::HostProfilerOptions{.enabled = !args.profile.empty()});
  engine::Engine engine(*loaded->model, engine_options(s, args, longest),
                        args.profile.empty() ? nullptr : &profiler);
  const engine::EngineRun run = engine.run(requests);

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
  if (args.no_output)
    return;
  const std::string out = args.out.empty() ? s.outputs.dir : args.out;
  std::filesystem::create_directories(out);
  traces::TokenTraceWriter writer((std::filesystem::path(out) / "token_trace.csv").string());
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.discarded)
      continue;
    traces::TokenTraceRow row;
    row.request_id = t.request.value;
    row.position = t.position;
    row.exit_depth = t.exit_depth;
    row.exit_point = t.exit_point;
    row.score = t.score;
    row.policy = s.exit_policy.kind;
    row.time_ns = t.time;
    writer.write(row);
  }
  writer.finish();
  fmt::print("wrote      {}/token_trace.csv\n", out);
  if (!args.profile.empty()) {
    write_profile(profiler, run, *loaded->model, args.profile);
    fmt::print(
        "profile    {} ops in {}/op_trace.csv and op_trace.json, their requests per step "
        "in steps.csv\n",
        profiler.size(), args.profile);
  }
}

struct EvalArgs {
  ModelOptions model;
  std::vector<double> thresholds;
  std::string measure = "top1";
  std::vector<double> router_thresholds;
  std::string strategy;
  engine::QualityEvalOptions options;
  std::string out;
};

void run_eval(const EvalArgs& args) {
  const auto loaded = load_model(args.model);
  const std::vector<std::int32_t> corpus = args.model.corpus(loaded->config);
  std::vector<policy::ExitPolicyParams> settings;
  for (const double t : args.thresholds) {
    policy::ExitPolicyParams p;
    p.kind = "confidence";
    p.threshold = t;
    p.confidence_measure = args.measure;
    settings.push_back(p);
  }
  for (const double t : args.router_thresholds) {
    policy::ExitPolicyParams p;
    p.kind = "router_expert_choice";
    p.threshold = t;
    settings.push_back(p);
  }
  engine::QualityEvalOptions options = args.options;
  const bool recursive = loaded->config.shape.depth.recursions > 0;
  options.strategy = strategy_named(
      args.strategy.empty() ? (recursive ? "skip_kv" : "state_copy") : args.strategy, "--strategy");
  const auto results = engine::evaluate_quality(*loaded->model, corpus, settings, options);
  const engine::QualityTable table = engine::quality_table_of(results);
  std::ostringstream text;
  table.write(text);
  fmt::print("{}", text.str());
  if (!args.out.empty()) {
    traces::detail::AtomicOutputFile file(args.out);
    file.write(text.str());
    file.finish();
    fmt::print("wrote {}\n", args.out);
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
      "scheduler), writing the token trace and, with --profile, the op trace");
  run_args->model.add_to(*run);
  run_args->scenario.add_to(*run);
  run->add_option("--out", run_args->out, "Output directory (default: outputs.dir)");
  run->add_flag("--no-output", run_args->no_output, "Print the summary only; write no files");
  run->add_option("--profile", run_args->profile, "Write the op trace (CSV and Chrome JSON) here");
  run->add_flag("--honour-arrivals", run_args->honour_arrivals,
                "Wait for each request's arrival time instead of taking all at once");
  run->add_flag("--rollback", run_args->rollback,
                "deferred_fill: replace a filled token whose full-depth prediction disagrees, "
                "discarding what followed it; the disagreement rate calibrates "
                "sync.rollback_probability");
  run->add_option("--temperature", run_args->temperature, "Sampling temperature (0: greedy)")
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
  eval->add_option("--router-thresholds", eval_args->router_thresholds,
                   "Expert-choice router score thresholds")
      ->delimiter(',');
  eval->add_option("--strategy", eval_args->strategy,
                   "Synchronization strategy (default: skip_kv on recursive models, else "
                   "state_copy)");
  eval->add_option("--context", eval_args->options.context, "Prompt tokens per window")
      ->check(CLI::PositiveNumber);
  eval->add_option("--window", eval_args->options.window, "Scored tokens per window")
      ->check(CLI::PositiveNumber);
  eval->add_option("--max-windows", eval_args->options.max_windows, "Windows at most (0: all)");
  eval->add_option("--out,-o", eval_args->out, "Write the quality table here");
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
}

}  // namespace exitsim::cli
