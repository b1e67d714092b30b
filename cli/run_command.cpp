#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <memory>

#include "commands.hpp"
#include "exitsim/analysis/trace_summary.hpp"
#include "exitsim/sim/kv_capacity.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {
namespace {

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1 << 30); }

void print_setup(const scenario::Scenario& s, const sim::KvCapacity& kv) {
  const ModelShape& m = s.model.shape;
  const HardwareSpec& h = s.hardware.spec;
  fmt::print("scenario   {} (seed {})\n", s.name, s.seed);
  fmt::print(
      "model      {}: {:.3f} B parameters ({:.2f} GiB {}), depth {} layers ({} unique), "
      "d_model {}, {}/{} heads, exit points {}\n",
      m.name, static_cast<double>(m.parameter_count()) / 1e9, gib(m.weight_bytes()),
      to_string(m.dtype), m.depth.full_depth(), m.depth.unique_layers(), m.d_model, m.n_heads,
      m.n_kv_heads, m.depth.effective_exit_points());
  fmt::print("hardware   {}: {:.1f} TFLOP/s {}, {:.2f} TB/s, {:.2f} GiB\n", h.name,
             h.peak_flops_for(m.dtype) / 1e12, to_string(m.dtype), h.memory_bandwidth / 1e12,
             gib(h.memory_bytes));
  fmt::print("kv memory  {} blocks x {} tokens = {} tokens ({:.2f} GiB, {} KiB per token)\n",
             kv.blocks, kv.block_size, kv.tokens(),
             gib(kv.tokens() * kv.kv_bytes_per_token), kv.kv_bytes_per_token / 1024);
  fmt::print("serving    {} replica(s), router {}, scheduler {} (max_running {}, "
             "max_batched_tokens {}), cost model {}\n",
             s.cluster.replicas, s.cluster.router, s.scheduler.kind, s.scheduler.max_running,
             s.scheduler.max_batched_tokens, s.cost_model.kind);
  fmt::print("depth      exit policy {}, synchronization {}\n", s.exit_policy.kind,
             s.sync.strategy);
}

void run_main_job(const ScenarioOptions& options) {
  const scenario::Scenario s = options.load();
  const sim::KvCapacity kv = sim::derive_kv_capacity(
      s.model.shape, s.hardware.spec,
      {s.scheduler.block_size, s.scheduler.kv_blocks, s.scheduler.memory_reserve_fraction});
  print_setup(s, kv);

  const auto workload = sim::make_workload(s.workload, s.seed);
  const analysis::TraceSummary summary = analysis::summarize_requests(*workload);
  const std::string source =
      s.workload.source == "trace" ? s.workload.trace.path : std::string("synthetic workload");
  fmt::print("\n{}", analysis::format_trace_summary(summary, source, workload->format_name()));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<ScenarioOptions>();
  CLI::App* run = app.add_subcommand(
      "run", "The main job on a scenario (the embedded default without one): resolve it, size "
             "each replica's KV memory and characterise the workload it describes");
  options->add_to(*run);
  run->callback([options] { run_main_job(*options); });
}

}  // namespace exitsim::cli
