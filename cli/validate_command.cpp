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
#include "engine_support.hpp"
#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/cost_profile.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::cli {

namespace {

struct ValidateArgs {
  ModelOptions model;
  ScenarioOptions scenario;
  std::string profile;
  std::vector<std::string> strategies = {"full_depth", "depthwise"};
  std::string out = "validation";
};

// One engine run, as measured: its steps' durations and the request metrics.
struct EngineMeasurement {
  std::vector<TimeNs> iterations;
  std::vector<std::vector<policy::StepRow>> steps;  // per step, what each sequence ran
  sim::MetricsSummary summary;
  std::int64_t kv_blocks = 0;
};

EngineMeasurement measure_engine(const LoadedModel& loaded, const scenario::Scenario& s,
                                 const std::vector<engine::EngineRequest>& requests,
                                 const std::string& token_trace_path) {
  std::int64_t longest = 1;
  for (const engine::EngineRequest& r : requests)
    longest = std::max(longest, static_cast<std::int64_t>(r.prompt.size()) + r.output_tokens);
  RunArgs args;
  args.honour_arrivals = true;  // the simulator sees the workload's arrivals too
  const engine::EngineOptions options = engine_options(s, args, longest);
  engine::Engine engine(*loaded.model, options, nullptr);
  const engine::EngineRun run = engine.run(requests);

  EngineMeasurement m;
  m.kv_blocks = options.kv_blocks;
  sim::MetricsCollector metrics(sim::MetricsOptions{});
  for (std::size_t k = 0; k < run.steps.size(); ++k) {
    const engine::StepRecord& step = run.steps[k];
    const TimeNs end =
        k + 1 < run.steps.size() ? run.steps[k + 1].start - run.steps[k + 1].idle_before : run.wall;
    m.iterations.push_back(end - step.start);
    m.steps.push_back(step.rows);
    metrics.record_iteration({0, step.start, end - step.start,
                              static_cast<std::int64_t>(step.prefill.size() + step.decode.size()),
                              0, 0, 0, 0});
  }
  struct Times {
    TimeNs first = -1, last = -1;
    std::int64_t tokens = 0;
  };
  std::map<std::uint64_t, Times> times;
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.discarded)
      continue;
    Times& r = times[t.request.value];
    r.first = r.first < 0 ? t.time : std::min(r.first, t.time);
    r.last = std::max(r.last, t.time);
    ++r.tokens;
  }
  write_token_trace(run, s.exit_policy.kind, token_trace_path);
  for (const engine::EngineRequest& r : requests) {
    const Times& t = times[r.id.value];
    sim::RequestRecord record;
    record.id = r.id;
    record.arrival = r.arrival;
    record.first_scheduled = r.arrival;
    record.first_token = t.first;
    record.completion = t.last;
    record.input_tokens = static_cast<std::int64_t>(r.prompt.size());
    record.output_tokens = t.tokens;
    metrics.record_request(record);
  }
  m.summary = metrics.summarize();
  return m;
}

// The engine's steps priced by the profile, step by step: the cost model's own error. Each step
// is priced from the rows the engine recorded (its executed synchronization plan), through the
// same translation the simulator prices its own iterations with.
analysis::IterationError price_engine_steps(const EngineMeasurement& m,
                                            const sim::CalibratedCostModel& model,
                                            const DepthStructure& depth,
                                            policy::SyncStrategy strategy) {
  sim::StepPricer pricer(model, depth, strategy);
  std::vector<TimeNs> priced;
  priced.reserve(m.steps.size());
  for (const std::vector<policy::StepRow>& rows : m.steps)
    priced.push_back(pricer.duration(rows));
  return analysis::compare_iterations(m.iterations, priced);
}

void run_validate(const ValidateArgs& args) {
  const auto loaded = load_model(args.model);
  const sim::CostProfile profile = sim::CostProfile::read(args.profile);
  // The engine runs here: a profile of another machine or model would be validated against
  // measurements it never claimed to predict.
  if (profile.source.hardware != loaded->model->hardware()) {
    throw InputError({args.profile, 0, 0, "source.hardware"},
                     expected_found("this machine (\"" + loaded->model->hardware() + "\")",
                                    "\"" + profile.source.hardware + "\""));
  }
  if (profile.source.model_shape != sim::model_fingerprint(loaded->config.shape)) {
    throw InputError({args.profile, 0, 0, "source.model_shape"},
                     expected_found("the model in " + args.model.dir + " (" +
                                        sim::model_fingerprint(loaded->config.shape) + ")",
                                    "\"" + profile.source.model_shape + "\""));
  }
  const std::vector<std::int32_t> corpus = args.model.corpus(loaded->config);
  std::filesystem::create_directories(args.out);
  std::vector<analysis::ValidationResult> results;
  for (const std::string& strategy : args.strategies) {
    ScenarioOptions options = with_engine_model(args.scenario, loaded->config.shape);
    options.overrides.push_back("sync.strategy=" + strategy);
    const scenario::Scenario s = options.load();
    const std::vector<engine::EngineRequest> requests = engine_requests(s, corpus);
    const std::string token_trace =
        (std::filesystem::path(args.out) / (strategy + "_token_trace.csv")).string();
    const EngineMeasurement measured = measure_engine(*loaded, s, requests, token_trace);

    // The same requests, exit decisions, scheduler, memory and strategy in the simulator,
    // priced by the profile.
    ScenarioOptions simulated = options;
    simulated.overrides.insert(simulated.overrides.end(),
                               {"cost_model.kind=calibrated", "cost_model.profile=" + args.profile,
                                "hardware.name=\"" + profile.source.hardware + "\"",
                                "exit_policy={kind: replay, token_trace: \"" + token_trace + "\"}",
                                fmt::format("scheduler.kv_blocks={}", measured.kv_blocks)});
    const scenario::Scenario sim_scenario = simulated.load();
    sim::SimulationConfig config = sim::simulation_config_from(sim_scenario, "");
    std::vector<TimeNs> iterations;
    config.iteration_observer = [&](const sim::IterationRecord& it) {
      iterations.push_back(it.duration);
    };
    const auto workload = sim::make_workload(sim_scenario.workload, sim_scenario.seed);
    const sim::SimulationResult result = sim::simulate(config, *workload);
    results.push_back(analysis::compare_runs(strategy, measured.summary, result.summary,
                                             measured.iterations, iterations));
    const sim::CalibratedCostModel priced(profile, args.profile, loaded->config.shape);
    results.back().same_batches = price_engine_steps(measured, priced, loaded->config.shape.depth,
                                                     *policy::parse_sync_strategy(strategy));
    fmt::print("{}", analysis::format_validation(std::span(&results.back(), 1)));
  }
  const std::string csv = (std::filesystem::path(args.out) / "validation.csv").string();
  traces::write_file_atomically(csv, analysis::validation_csv(results));
  const std::string json = (std::filesystem::path(args.out) / "validation.json").string();
  traces::write_file_atomically(json, analysis::validation_json(results));
  fmt::print("wrote      {} and validation.json\n", csv);
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* command = app.add_subcommand(
      "validate",
      "Run the engine on a scenario's workload, replay the same requests and exit decisions in "
      "the simulator priced by a calibrated profile, and report the error per strategy");
  args->model.add_to(*command);
  args->scenario.add_to(*command);
  command->add_option("--profile", args->profile, "Cost profile from `exitsim calibrate`")
      ->required();
  command
      ->add_option("--strategies", args->strategies,
                   "Synchronization strategies to validate (default full_depth,depthwise)")
      ->delimiter(',');
  command->add_option("-o,--out", args->out, "Directory for validation.csv and token traces");
  command->callback([args] { run_validate(*args); });
}

}  // namespace exitsim::cli
