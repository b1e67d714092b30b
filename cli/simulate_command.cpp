#include <fmt/core.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/kv_capacity.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "exitsim/traces/staged_output_directory.hpp"
#include "progress.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {
namespace {

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(1 << 30);
}

sim::KvCapacity kv_capacity(const scenario::ReplicaGroup& g) {
  return sim::derive_kv_capacity(g.model.shape, g.hardware.spec,
                                 {g.scheduler.block_size, g.scheduler.kv_blocks,
                                  g.scheduler.memory_reserve_fraction, 0, g.parallel});
}

// "h100-sxm" or "4 x h100-sxm (TP 4)": what one replica runs on.
std::string replica_hardware(const scenario::ReplicaGroup& g) {
  if (g.parallel.gpus() == 1)
    return g.hardware.spec.name;
  if (g.parallel.pipeline == 1) {
    return fmt::format("{} x {} (TP {})", g.parallel.gpus(), g.hardware.spec.name,
                       g.parallel.tensor);
  }
  return fmt::format("{} x {} (TP {}, PP {})", g.parallel.gpus(), g.hardware.spec.name,
                     g.parallel.tensor, g.parallel.pipeline);
}

// The split of a multi-GPU replica: its links, and its pipeline stages and their schedule.
void print_parallel(const scenario::ReplicaGroup& g, std::int64_t replicas,
                    const sim::KvCapacity& kv) {
  const ParallelSpec& p = g.parallel;
  const Interconnect& link = g.hardware.spec.interconnect;
  fmt::print(
      "parallel   tensor {}, pipeline {}{}: {} GPUs per replica, {} in all; node link {:.0f} GB/s "
      "per direction, {:.1f} us per collective; {:.2f} GiB of weights per GPU{}\n",
      p.tensor, p.pipeline,
      p.expert > 1 ? fmt::format(", experts whole over {} GPUs", p.expert) : std::string(),
      p.gpus(), replicas * p.gpus(), link.link_bandwidth / 1e9, to_microseconds(link.link_latency),
      gib(kv.weight_bytes),
      p.pipeline > 1 ? fmt::format(" (stage {}, the fullest)", kv.binding_stage) : std::string());
  if (p.pipeline == 1)
    return;
  std::string layers;
  for (const PipelineStage& stage : split_pipeline(g.model.shape.depth.full_depth(), p.pipeline))
    layers += fmt::format("{}{}", layers.empty() ? "" : "+", stage.layers());
  const bool network = p.gpus() > link.gpus_per_node;
  fmt::print(
      "pipeline   layers per stage {}; up to {} micro-batches cycle through the stages (vLLM "
      "virtual engines); hand-offs over the node link{}\n",
      layers, p.pipeline,
      network ? fmt::format(" and, between nodes, {:.0f} GB/s with {:.1f} us per send",
                            link.node_link_bandwidth / 1e9, to_microseconds(link.node_link_latency))
              : std::string());
}

// One line per replica group, for clusters whose replicas differ.
void print_groups(const scenario::Scenario& s) {
  fmt::print("replicas   {} in {} groups\n", s.cluster.replicas, s.replica_groups.size());
  for (std::size_t i = 0; i < s.replica_groups.size(); ++i) {
    const scenario::ReplicaGroup& g = s.replica_groups[i];
    const ModelShape& m = g.model.shape;
    const HardwareSpec& h = g.hardware.spec;
    fmt::print(
        "group {:<4} {} x {} ({:.2f} GiB each), model {} ({}), scheduler {} (max_running {}, "
        "max_batched_tokens {}), {} KV blocks, cost model {}\n",
        i, g.count, replica_hardware(g), gib(h.memory_bytes), m.name, to_string(m.dtype),
        g.scheduler.kind, g.scheduler.max_running, g.scheduler.max_batched_tokens,
        kv_capacity(g).blocks, g.cost_model.kind);
  }
  fmt::print("serving    router {}, exit policy {}, synchronization {}\n", s.cluster.router,
             s.exit_policy.kind, s.sync.strategy);
}

// What a Hugging Face config's layers add to a plain stack, and how it is priced (nothing for
// a model whose layers are alike and attend over the whole context).
void print_layer_kinds(const ModelShape& m) {
  const auto count = [](const std::vector<bool>& layers) {
    return std::count(layers.begin(), layers.end(), true);
  };
  if (m.is_moe() && (m.shared_experts > 0 || !m.dense_layers.empty())) {
    const std::string dense =
        m.dense_layers.empty()
            ? std::string()
            : fmt::format("; {} of {} layers dense ({} hidden units, no router)",
                          count(m.dense_layers), m.depth.unique_layers(), m.dense_ffn_dim);
    fmt::print("mlp        {} shared expert(s) of {} hidden units beside the routed ones{}\n",
               m.shared_experts, m.ffn_dim, dense);
  }
  if (m.latent.enabled()) {
    fmt::print(
        "attention  latent: {} + {} cached per token and layer ({} bytes), decode absorbs "
        "the latent's up-projection (vLLM's MLA), prefill up-projects it\n",
        m.latent.kv_lora_rank, m.latent.rope_head_dim, m.kv_bytes_per_token_per_layer());
  }
  if (!m.windowed_layers.empty()) {
    const bool sliding = m.window.kind == WindowKind::sliding;
    fmt::print(
        "attention  {} of {} layers {} {} tokens: priced over the keys {}; K/V memory "
        "holds every layer's whole context (out-of-window blocks are not freed)\n",
        count(m.windowed_layers), m.depth.unique_layers(),
        sliding ? "slide over the last" : "attend within chunks of", m.window.tokens,
        sliding ? "in the window" : "of the query's chunk");
  }
}

void print_setup(const scenario::Scenario& s) {
  fmt::print("scenario   {} (seed {})\n", s.name, s.seed);
  if (s.replica_groups.size() > 1) {
    print_groups(s);
    return;
  }
  // One group may still override the top-level sections; it is what runs.
  const scenario::ReplicaGroup& g = s.replica_groups.front();
  const ModelShape& m = g.model.shape;
  const HardwareSpec& h = g.hardware.spec;
  const sim::KvCapacity kv = kv_capacity(g);
  fmt::print(
      "model      {}: {:.3f} B parameters ({:.2f} GiB {}), depth {} layers ({} unique), "
      "exit points {}\n",
      m.name, static_cast<double>(m.parameter_count()) / 1e9, gib(m.weight_bytes()),
      to_string(m.dtype), m.depth.full_depth(), m.depth.unique_layers(),
      m.depth.effective_exit_points());
  if (m.is_moe()) {
    fmt::print("experts    {} per layer, top-{}: {:.3f} B parameters active per token\n", m.experts,
               m.experts_per_token, static_cast<double>(m.active_parameters_per_token()) / 1e9);
  }
  print_layer_kinds(m);
  fmt::print("hardware   {} x {}: {:.1f} TFLOP/s {}, {:.2f} TB/s, {:.2f} GiB each\n",
             s.cluster.replicas, replica_hardware(g), h.peak_flops_for(m.dtype) / 1e12,
             to_string(m.dtype), h.memory_bandwidth / 1e12, gib(h.memory_bytes));
  if (g.cost_model.kind == "roofline")
    fmt::print("kernels    {}\n", sim::kernel_corrections_note(h));
  if (g.parallel.gpus() > 1)
    print_parallel(g, s.cluster.replicas, kv);
  fmt::print("kv memory  {} blocks x {} tokens = {} tokens per replica ({} KiB per token{})\n",
             kv.blocks, kv.block_size, kv.tokens(), kv.kv_bytes_per_token / 1024,
             g.parallel.gpus() > 1 ? " per GPU" : "");
  fmt::print(
      "serving    router {}, scheduler {} (max_running {}, max_batched_tokens {}), cost "
      "model {}, exit policy {}, synchronization {}\n",
      s.cluster.router, g.scheduler.kind, g.scheduler.max_running, g.scheduler.max_batched_tokens,
      // A block-only price is no step time: said where the cost model is named.
      g.cost_model.timing_scope == "block_only"
          ? g.cost_model.kind + " (timing scope block_only: block times, not step times)"
          : g.cost_model.kind,
      s.exit_policy.kind, s.sync.strategy);
}

struct SimulateArgs {
  ScenarioOptions scenario;
  std::string out_dir;  // overrides outputs.dir
  bool no_output = false;
  bool baseline = false;
};

// The same scenario, workload and seed with every token at full depth: the run a dynamic-depth
// setting has to beat.
sim::SimulationResult run_full_depth_baseline(const scenario::Scenario& dynamic) {
  scenario::Scenario full = dynamic;
  full.exit_policy = scenario::ExitPolicyConfig{};
  full.exit_policy.kind = "none";
  full.sync = scenario::SyncConfig{};
  full.sync.strategy = "full_depth";
  const auto workload = sim::make_workload(full.workload, full.seed);
  return sim::simulate(sim::simulation_config_from(full, ""), *workload);
}

void print_speedup(const sim::MetricsSummary& dynamic, const sim::MetricsSummary& full) {
  const auto ratio = [](double baseline, double value) { return value > 0 ? baseline / value : 0; };
  fmt::print(
      "vs full depth  throughput x{:.3f}, mean TPOT x{:.3f}, p99 TPOT x{:.3f}, mean E2E x{:.3f} "
      "(full depth: {:.1f} tokens/s, mean TPOT {:.3f} ms; >1 means the dynamic run is faster)\n",
      ratio(static_cast<double>(full.makespan), static_cast<double>(dynamic.makespan)),
      ratio(full.tpot.mean, dynamic.tpot.mean), ratio(full.tpot.p99, dynamic.tpot.p99),
      ratio(full.e2e.mean, dynamic.e2e.mean), full.throughput_tokens_per_s, full.tpot.mean);
}

void simulate(const SimulateArgs& args) {
  const scenario::Scenario s = args.scenario.load();
  print_setup(s);
  if (!s.sweep.empty()) {
    std::size_t points = 1;
    for (const scenario::SweepAxis& axis : s.sweep)
      points *= axis.values.size();
    fmt::print("sweep      {} axes ({} points) defined; simulate runs the base scenario only\n",
               s.sweep.size(), points);
  }
  std::fflush(stdout);

  // Outputs are written beside the folder and moved into it when the run succeeds.
  std::optional<traces::StagedOutputDirectory> out;
  if (!args.no_output) {
    out.emplace(args.out_dir.empty() ? s.outputs.dir : args.out_dir,
                args.out_dir.empty() ? "outputs.dir" : "--out");
  }
  const sim::SimulationConfig config = sim::simulation_config_from(s, out ? out->staging() : "");
  const auto workload = sim::make_workload(s.workload, s.seed);

  // A synthetic workload's size is known; a trace's, only when capped.
  const std::int64_t expected =
      s.workload.source == "synthetic" ? s.workload.requests : s.workload.trace.max_requests;
  ProgressReporter reporter("simulate", "requests finished");
  const sim::ProgressCallback progress = [&](const sim::Progress& p) {
    reporter.update(static_cast<double>(p.requests_finished), static_cast<double>(expected),
                    fmt::format("{:.1f} s simulated", to_seconds(p.now)));
  };
  const sim::SimulationResult result = sim::simulate(config, *workload, progress);
  reporter.update(static_cast<double>(result.summary.requests), static_cast<double>(expected),
                  fmt::format("{:.1f} s simulated", to_seconds(result.totals.end_time)));
  reporter.finish();

  fmt::print("\n{}", sim::format_summary(result.summary));
  if (args.baseline) {
    print_speedup(result.summary, run_full_depth_baseline(s).summary);
  }
  if (out) {
    if (s.outputs.summary_json) {
      traces::write_file_atomically(
          (std::filesystem::path(out->staging()) / "summary.json").string(),
          sim::summary_to_json(result.summary));
    }
    out->commit();
    fmt::print("outputs in {}/\n", out->target());
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* command =
      app.add_subcommand("simulate",
                         "Simulate the serving cluster a scenario describes (the embedded default "
                         "without one) and report latency, throughput and goodput");
  args->scenario.add_to(*command);
  command->add_option("-o,--out", args->out_dir, "Output directory (default: outputs.dir)");
  command->add_flag("--no-output", args->no_output, "Print the summary only; write no files");
  command->add_flag("--baseline", args->baseline,
                    "Also run the same workload and seed at full depth and report the speedup");
  command->callback([args] { simulate(*args); });
}

}  // namespace exitsim::cli
