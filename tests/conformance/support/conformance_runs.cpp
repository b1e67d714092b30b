// The conformance suite's runs (conformance_runs.hpp).
#include "conformance/support/conformance_runs.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/support/support_model.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/engine/options_from_setup.hpp"
#include "exitsim/policy/kv_layout.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/setup/executor_setup.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/traces/token_trace.hpp"
#include "support/request_traces.hpp"
#include "support/test_files.hpp"

namespace exitsim::conformance {
namespace {

using engine::test_support::small_config;
using engine::test_support::small_recursive_depth;
using engine::test_support::small_weights;

// A prelude layer, a 2-layer block three times, a coda layer: exit points at 3, 5, 7.
struct Model {
  engine::ModelConfig config = small_config(small_recursive_depth());
  engine::ModelWeights weights = small_weights(config);
  engine::CpuModel cpu{config, weights};
};

const Model& model() {
  static const Model m;
  return m;
}

// Token traces of the small model deciding its own exits (confidence at 0.5, token-choice
// routers), written once: replayed, they drive model-dependent policies through both executors.
std::string measured_exits(const std::string& kind) {
  static std::map<std::string, std::string> paths;
  if (const auto found = paths.find(kind); found != paths.end())
    return found->second;
  engine::EngineOptions options;
  options.strategy = policy::SyncStrategy::state_copy;
  options.exit_policy.kind = kind;
  options.exit_policy.threshold = 0.5;
  options.kv_blocks = 4096;
  options.block_size = 4;
  engine::Engine run_engine(model().cpu, options);
  const engine::EngineRun run = run_engine.run(engine_requests());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("exitsim_conformance_" + kind + ".csv")).string();
  traces::TokenTraceWriter writer(path);
  for (const engine::GeneratedToken& t : run.tokens) {
    writer.write(
        {t.request.value, t.position, t.exit_depth, t.exit_point, t.score, kind, 0, t.time});
  }
  writer.finish();
  return paths[kind] = path;
}

std::vector<std::string> overrides_for(const Case& c) {
  // The simulator models the engine's very model (scenario_for also copies the shape itself).
  std::vector<std::string> o = {
      "model.preset=null",        "model.name=small-test", "model.d_model=32",
      "model.n_heads=4",          "model.n_kv_heads=2",    "model.head_dim=8",
      "model.ffn_dim=64",         "model.vocab=50",        "model.dtype=fp32",
      "model.max_context=512",    "model.depth.prelude=1", "model.depth.block=2",
      "model.depth.recursions=3", "model.depth.coda=1",    "model.depth.lora_rank=[0, 4, 4]"};
  const std::vector<std::string> run = {
      "scheduler.kind=" + c.scheduler,
      "scheduler.block_size=4",
      "scheduler.kv_blocks=40",
      "scheduler.max_running=8",
      "sync.strategy=" + c.strategy,
      "scheduler.max_batched_tokens=" + std::string(c.scheduler == "chunked_prefill" ? "24" : "96"),
      "seed=3"};
  o.insert(o.end(), run.begin(), run.end());
  if (c.exited_tokens != "immediate") {
    // Three slots and a head call per three exited tokens: the slots they hold matter.
    const bool ahead = c.exited_tokens == "head_queue_ahead";
    o.emplace_back("sync.exited_tokens=" + (ahead ? std::string("head_queue") : c.exited_tokens));
    if (ahead)
      o.emplace_back("sync.head_queue_returns=ahead_of_waiting");
    o.emplace_back("sync.accumulate_threshold=3");
    o.emplace_back("scheduler.max_running=3");
  }
  if (c.preemption == "swap") {
    // Host room for about 60 pool blocks of this model: a few victims fit, others are recomputed.
    o.emplace_back("scheduler.preemption=swap");
    o.emplace_back("hardware.host_swap_gb=0.00003");
    o.emplace_back("hardware.host_link_bandwidth_gbps=0.5");  // a transfer costs about a step
  }
  if (c.exits == "distribution") {
    o.emplace_back("exit_policy.kind=distribution");
    o.emplace_back("exit_policy.probabilities=[0.45, 0.3, 0.25]");
  } else if (c.exits == "position_schedule") {
    o.emplace_back("exit_policy.kind=position_schedule");
    o.emplace_back(
        "exit_policy.schedule=[{from_position: 0, depth: 7}, {from_position: 6, depth: 5}, "
        "{from_position: 18, depth: 3}]");
  } else if (c.exits == "adaptive") {
    // FREE's adaptive threshold from 0.9, refitting at each admission: the engine decides from
    // its probed confidences, the simulator replays them (confidence_trace, set per run).
    o.emplace_back("exit_policy={kind: adaptive_threshold, threshold: 0.9}");
  } else {
    const std::string kind = c.exits == "replay_confidence" ? "confidence" : "router_token_choice";
    o.emplace_back("exit_policy={kind: replay, token_trace: \"" + measured_exits(kind) + "\"}");
  }
  return o;
}

}  // namespace

std::vector<Request> workload() {
  RandomStream draws(11, "conformance.workload");
  std::vector<Request> out;
  TimeNs t = 0;
  for (std::uint64_t id = 0; id < 14; ++id) {
    t += static_cast<TimeNs>(draws.exponential(1.0 / 40'000.0));  // mean gap 40 us
    out.push_back({id, t, draws.uniform_int(6, 36), draws.uniform_int(8, 28)});
  }
  return out;
}

// The workload's requests for the engine: prompts of random tokens, the same in every run.
std::vector<engine::EngineRequest> engine_requests() {
  std::vector<engine::EngineRequest> requests;
  RandomStream tokens(5, "conformance.prompts");
  for (const Request& r : workload()) {
    engine::EngineRequest e;
    e.id = RequestId(r.id);
    e.arrival = r.arrival;
    for (std::int64_t t = 0; t < r.prompt; ++t)
      e.prompt.push_back(static_cast<std::int32_t>(tokens.uniform_int(0, 49)));
    e.output_tokens = r.output;
    requests.push_back(std::move(e));
  }
  return requests;
}

std::string name_of(const Case& c) {
  return c.scheduler + "_" + c.strategy + "_" + c.exits +
         (c.exited_tokens == "immediate" ? "" : "_" + c.exited_tokens) +
         (c.preemption == "recompute" ? "" : "_" + c.preemption);
}

// For gtest's messages (the test name says it too).
void PrintTo(const Case& c, std::ostream* out) {
  *out << name_of(c);
}

Traces simulate(const scenario::Scenario& s) {
  sim::SimulationConfig config = sim::simulation_config_from(s, "");
  Traces out;
  config.step_observer = [&](int, const policy::StepTrace& step) { out.steps.push_back(step); };
  std::vector<RequestDescriptor> requests;
  for (const Request& r : workload())
    requests.push_back({RequestId(r.id), r.arrival, r.prompt, r.output});
  test_support::VectorSource source(requests);
  const sim::SimulationResult result = sim::simulate(config, source);
  out.makespan = result.totals.end_time;
  if (result.summary.adaptive_threshold)
    out.trajectory = result.summary.adaptive_threshold->trajectory;
  return out;
}

Traces run_engine(const scenario::Scenario& s) {
  const scenario::ReplicaGroup& group = s.replica_groups.front();
  const std::unique_ptr<sim::CostModel> cost =
      sim::make_cost_model(group.cost_model, group.model.shape, group.hardware.spec, {},
                           sim::prices_exit_probes(s.exit_policy));
  // Scheduling, exits, synchronisation and the host swap tier through the one scenario adapter,
  // as `exitsim engine run` and `validate` build them.
  const setup::ExecutorSetup setup = setup::executor_setup(s);
  sim::StepPricer pricer(*cost, group.model.shape.depth, setup.strategy);
  const setup::HostSwapLink swap = setup.host_swap.value_or(setup::HostSwapLink{});
  engine::EngineOptions options = engine::options_from_setup(setup);
  options.honour_arrivals = true;
  Traces out;
  options.step_duration = [&](const policy::StepTrace& step) {
    return pricer.duration(step.rows) +
           swap.transfer(step.swapped_out_blocks + step.swapped_in_blocks);
  };
  options.step_observer = [&](const policy::StepTrace& step) { out.steps.push_back(step); };

  engine::Engine executor(model().cpu, options);
  const engine::EngineRun run = executor.run(engine_requests());
  out.makespan = run.wall;
  out.swaps = run.swaps;
  for (const engine::ThresholdTrajectoryPoint& point : run.threshold_trajectory) {
    const policy::ThresholdRefit& r = point.refit;
    const auto& [disagree, agree] = r.mixture.components;
    out.trajectory.push_back({static_cast<std::int64_t>(point.step), point.time, 0, r.attempt,
                              r.pairs, r.fitted, r.threshold, disagree.alpha, disagree.beta,
                              agree.alpha, agree.beta});
  }
  for (const engine::GeneratedToken& t : run.tokens) {
    out.tokens.push_back({t.request.value, t.position, t.exit_depth, t.exit_point, t.score,
                          s.exit_policy.kind, 0, t.time, t.confidences, t.agreements});
  }
  return out;
}

// The engine run's token trace, for the simulator to replay its confidences and agreements.
std::string write_confidence_trace(const Traces& executed, const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("exitsim_conformance_" + name + ".csv")).string();
  traces::TokenTraceWriter writer(path);
  for (const traces::TokenTraceRow& row : executed.tokens)
    writer.write(row);
  writer.finish();
  return path;
}

scenario::Scenario scenario_for(const Case& c) {
  scenario::Scenario s = scenario::load_default_scenario(overrides_for(c));
  ModelShape shape = model().config.shape;
  shape.max_context = model().config.max_positions;
  s.replica_groups.front().model.shape = shape;
  return s;
}

// The first plan field that differs between two steps' rows, named with both values ("" if
// every plan field agrees), then anything else operator== compares: what the conformance check
// reports. Every field of the plan is listed, each fill group's tokens and join layer included.
std::string first_difference(const policy::StepTrace& a, const policy::StepTrace& b) {
  const auto differ = [](std::size_t row, const std::string& field, auto x, auto y) {
    return fmt::format("row {}: plan.{} {} vs {}", row, field, x, y);
  };
  for (std::size_t r = 0; r < std::min(a.rows.size(), b.rows.size()); ++r) {
    const policy::DepthPlan& x = a.rows[r].plan;
    const policy::DepthPlan& y = b.rows[r].plan;
    if (x.run_depth != y.run_depth)
      return differ(r, "run_depth", x.run_depth, y.run_depth);
    if (x.useful_depth != y.useful_depth)
      return differ(r, "useful_depth", x.useful_depth, y.useful_depth);
    if (x.kv_only_to != y.kv_only_to)
      return differ(r, "kv_only_to", x.kv_only_to, y.kv_only_to);
    if (x.fill_count != y.fill_count)
      return differ(r, "fill_count", int{x.fill_count}, int{y.fill_count});
    for (std::size_t g = 0; g < x.fill_count; ++g) {
      if (x.fills[g].tokens != y.fills[g].tokens)
        return differ(r, fmt::format("fills[{}].tokens", g), x.fills[g].tokens, y.fills[g].tokens);
      if (x.fills[g].depth != y.fills[g].depth)
        return differ(r, fmt::format("fills[{}].depth (join layer)", g), x.fills[g].depth,
                      y.fills[g].depth);
    }
    if (x.fills_complete != y.fills_complete)
      return differ(r, "fills_complete", x.fills_complete, y.fills_complete);
    if (x.exit_state_waits != y.exit_state_waits)
      return differ(r, "exit_state_waits", x.exit_state_waits, y.exit_state_waits);
  }
  return a == b ? "" : "a field outside the plans";
}

}  // namespace exitsim::conformance
