// `exitsim cost`: one iteration priced op by op (RooflineCostModel::op_breakdown) for the model,
// hardware, parallelism and cost-model settings of a scenario, with what bound each op's price
// and the scenario key that set it, then the iteration's totals (CostModel::iteration_cost).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/traces/atomic_output.hpp"
#include "output_paths.hpp"
#include "scenario_options.hpp"

namespace exitsim::cli {
namespace {

struct CostArgs {
  ScenarioOptions scenario;
  std::int64_t decode = 0;           // decode sequences
  std::int64_t prefill = 0;          // prefill tokens
  std::int64_t context = 0;          // tokens already in K/V
  std::int64_t prefill_context = 0;  // the prefill's, when given apart
  int depth = 0;                     // the decode sequences' exit depth; 0: the full depth
  int group = 0;                     // the replica group
  std::string format = "table";
  std::string out;
  // Which of the options were given.
  const CLI::Option* decode_option = nullptr;
  const CLI::Option* prefill_option = nullptr;
  const CLI::Option* prefill_context_option = nullptr;
  const CLI::Option* depth_option = nullptr;
};

// The most decode sequences one batch prices: each is an entry of the batch, and a count past
// any real batch (a typo's extra digits) would only exhaust memory.
constexpr std::int64_t k_max_decode = std::int64_t{1} << 20;
// The longest sequence, as the trace readers take requests (2^31 - 1 tokens): the cost model's
// integer sums of query-key pairs stay far from overflowing, whatever model.max_context says.
constexpr std::int64_t k_max_tokens = (std::int64_t{1} << 31) - 1;

bool given(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

// Every option checked on its own, before the scenario is read.
void check_options(const CostArgs& args) {
  if (args.format != "table" && args.format != "csv") {
    const std::vector<std::string> formats = {"table", "csv"};
    const std::string hint = nearest_match(args.format, formats);
    throw InputError({"", 0, 0, "--format"},
                     expected_found(one_of(formats), "\"" + args.format + "\"") +
                         (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
  }
  if (!given(args.decode_option) && !given(args.prefill_option)) {
    throw InputError({"", 0, 0, "--decode"},
                     expected_found("a batch to price: --decode B (sequences) and/or --prefill P "
                                    "(tokens)",
                                    "neither"));
  }
  if (given(args.decode_option) && (args.decode < 1 || args.decode > k_max_decode)) {
    throw_setting_error("--decode", fmt::format("1 to {} sequences", k_max_decode),
                        std::to_string(args.decode));
  }
  if (given(args.prefill_option) && (args.prefill < 1 || args.prefill > k_max_tokens)) {
    throw_setting_error("--prefill", fmt::format("1 to {} tokens", k_max_tokens),
                        std::to_string(args.prefill));
  }
  if (args.context < 0 || args.context > k_max_tokens) {
    throw_setting_error("--context", fmt::format("0 to {} cached tokens", k_max_tokens),
                        std::to_string(args.context));
  }
  if (given(args.prefill_context_option)) {
    if (!given(args.prefill_option))
      throw_setting_error("--prefill-context", "--prefill beside it", "none");
    if (args.prefill_context < 0 || args.prefill_context > k_max_tokens) {
      throw_setting_error("--prefill-context", fmt::format("0 to {} cached tokens", k_max_tokens),
                          std::to_string(args.prefill_context));
    }
  }
  if (given(args.depth_option) && !given(args.decode_option))
    throw_setting_error("--depth", "--decode beside it (the decode sequences' exit)", "none");
  if (args.group < 0)
    throw_setting_error("--group", "a replica group index >= 0", std::to_string(args.group));
  if (!args.out.empty())
    check_output_file_folder(args.out, "--out");
}

// The batch as the simulator would price it (sim/src/cost/step_batch.cpp's translation of the
// rows it plans): the prefill first, a whole prompt or its last chunk (it emits the first
// token), at the full depth; then the decode sequences, each emitting, planned by the scenario's
// synchronization strategy for an exit at --depth (the full depth without it).
std::vector<sim::BatchEntry> make_batch(const CostArgs& args, const sim::ReplicaSpec& spec) {
  const DepthStructure& depth = spec.model.depth;
  const int stacked = depth.stacked_depth();
  const auto strategy = policy::parse_sync_strategy(spec.sync.strategy);
  if (!strategy) {
    throw InputError({"", 0, 0, "sync.strategy"}, expected_found("a synchronization strategy",
                                                                 "\"" + spec.sync.strategy + "\""));
  }
  const bool shared = *strategy == policy::SyncStrategy::shared_kv;
  const std::int64_t max_context = spec.model.max_context;
  std::vector<sim::BatchEntry> batch;
  if (given(args.prefill_option)) {
    const std::int64_t cached =
        given(args.prefill_context_option) ? args.prefill_context : args.context;
    if (max_context > 0 && args.prefill > max_context - cached) {
      throw_setting_error(
          given(args.prefill_context_option) ? "--prefill-context" : "--prefill",
          fmt::format("cached and prefill tokens within model.max_context ({})", max_context),
          fmt::format("{} + {}", cached, args.prefill));
    }
    sim::BatchEntry prefill;
    prefill.query_tokens = args.prefill;
    prefill.context_tokens = cached;
    prefill.depth = stacked;
    prefill.emits_token = true;
    prefill.reuse_first_recursion_kv = shared;
    batch.push_back(prefill);
  }
  if (!given(args.decode_option))
    return batch;
  if (max_context > 0 && args.context >= max_context) {
    throw_setting_error("--context",
                        fmt::format("a decode context below model.max_context ({})", max_context),
                        std::to_string(args.context));
  }
  int exit = stacked;
  if (given(args.depth_option)) {
    if (args.depth < 1 || args.depth > stacked) {
      throw_setting_error(
          "--depth", fmt::format("an exit depth in [1, {}] (the model's stacked layers)", stacked),
          std::to_string(args.depth));
    }
    if (*strategy == policy::SyncStrategy::full_depth) {
      throw_setting_error("--depth",
                          "a sync.strategy that lets tokens exit (full_depth runs every token "
                          "through every layer)",
                          "sync.strategy full_depth");
    }
    exit = args.depth;
  }
  policy::PendingFill pending;
  policy::DepthPlan plan;
  policy::plan_token_depth(*strategy, exit, exit, stacked, &pending, plan);
  sim::BatchEntry decode;
  decode.query_tokens = 1;
  decode.context_tokens = args.context;
  decode.depth = plan.run_depth;
  decode.emits_token = true;
  if (plan.useful_depth < plan.run_depth)
    decode.useful_depth = plan.useful_depth;
  decode.kv_only_depth = plan.kv_only_to;
  decode.reuse_first_recursion_kv = shared;
  batch.insert(batch.end(), static_cast<std::size_t>(args.decode), decode);
  return batch;
}

// One row of the table, by section: layer (an op of layer 0), kv_only (the K/V-only projection
// of the lowest layer that runs one), probe (an op of the lowest exit point's probe) or head.
struct Row {
  std::string_view section;
  sim::OpCost op;
};

// The priced iteration: the rows, and the critical paths the iteration's total is built from.
struct Breakdown {
  std::vector<Row> rows;
  double layer0_ns = 0;        // layer 0's critical path, its K/V-only projection included
  double layers_ns = 0;        // every executed layer's
  int layers_run = 0;          // executed layers with a launched op
  int kv_layers = 0;           // layers whose K/V-only projection ran (state_copy)
  bool layers_differ = false;  // some run layer's path is not layer 0's
  double probes_ns = 0;
  int probe_points = 0;  // exit points whose probe ran
  int probe_layer = -1;  // the layer after which the shown probe runs
  double head_ns = 0;
};

double path_of(const sim::OpGraph& graph, const std::vector<sim::OpCost>& ops) {
  if (static_cast<int>(ops.size()) != graph.size())
    throw std::logic_error("exitsim cost: op_breakdown's ops do not match the op graph");
  std::vector<double> duration(ops.size());
  for (std::size_t v = 0; v < ops.size(); ++v)
    duration[v] = ops[v].duration_ns;
  std::vector<double> finish(ops.size());
  std::vector<int> via(ops.size());
  return graph.longest_path(duration, finish, via).length;
}

bool is_probe(sim::OpKind kind) {
  return kind == sim::OpKind::probe_norm || kind == sim::OpKind::probe_head ||
         kind == sim::OpKind::probe_softmax || kind == sim::OpKind::probe_reduce;
}

// The graph's launched ops in topological order (a collective after the op whose sum it takes).
void add_rows(std::string_view section, const sim::OpGraph& graph,
              const std::vector<sim::OpCost>& ops, std::vector<Row>& rows) {
  for (const int v : graph.topological_order()) {
    if (ops[static_cast<std::size_t>(v)].launched)
      rows.push_back({section, ops[static_cast<std::size_t>(v)]});
  }
}

Breakdown break_down(const sim::RooflineCostModel& model, std::span<const sim::BatchEntry> batch) {
  const std::vector<sim::OpCost> ops = model.op_breakdown(batch);
  // op_breakdown's ops by where they run: a layer's graph ops (its K/V-only projection apart),
  // a probe's (by the layer it follows), the head's.
  int last_layer = -1;
  for (const sim::OpCost& op : ops)
    last_layer = std::max(last_layer, op.layer);
  const auto count = static_cast<std::size_t>(last_layer + 1);
  std::vector<std::vector<sim::OpCost>> layer_ops(count);
  std::vector<std::vector<sim::OpCost>> probe_ops(count);
  std::vector<double> kv_ns(count, 0.0);
  std::vector<sim::OpCost> kv_op(count);
  std::vector<sim::OpCost> head_ops;
  for (const sim::OpCost& op : ops) {
    if (op.layer < 0) {
      head_ops.push_back(op);
      continue;
    }
    const auto l = static_cast<std::size_t>(op.layer);
    if (is_probe(op.kind)) {
      probe_ops[l].push_back(op);
    } else if (op.kind == sim::OpKind::kv_projection) {
      kv_ns[l] = op.duration_ns;
      kv_op[l] = op;
    } else {
      layer_ops[l].push_back(op);
    }
  }
  Breakdown b;
  std::vector<double> layer_ns(count, 0.0);
  std::vector<bool> layer_run(count, false);
  for (std::size_t l = 0; l < count; ++l) {
    if (layer_ops[l].empty())
      continue;
    layer_ns[l] = path_of(model.layer_graph(), layer_ops[l]) + kv_ns[l];
    b.layers_ns += layer_ns[l];
    layer_run[l] = std::any_of(layer_ops[l].begin(), layer_ops[l].end(),
                               [](const sim::OpCost& op) { return op.launched; }) ||
                   kv_op[l].launched;
    b.layers_run += layer_run[l] ? 1 : 0;
  }
  // The first layer priced: 0, or under timing_scope block_only the recursion block's first.
  std::size_t first = 0;
  while (first < count && layer_ops[first].empty())
    ++first;
  if (first < count) {
    b.layer0_ns = layer_ns[first];
    for (std::size_t l = first; l < count; ++l)
      b.layers_differ = b.layers_differ || (layer_run[l] && layer_ns[l] != layer_ns[first]);
    add_rows("layer", model.layer_graph(), layer_ops[first], b.rows);
  }
  for (std::size_t l = 0; l < count; ++l) {
    if (!kv_op[l].launched)
      continue;
    if (b.kv_layers++ == 0)
      b.rows.push_back({"kv_only", kv_op[l]});
  }
  for (std::size_t l = 0; l < count; ++l) {
    if (probe_ops[l].empty())
      continue;
    const double ns = path_of(model.probe_graph(), probe_ops[l]);
    const bool run = std::any_of(probe_ops[l].begin(), probe_ops[l].end(),
                                 [](const sim::OpCost& op) { return op.launched; });
    if (!run)
      continue;
    b.probes_ns += ns;
    ++b.probe_points;
    if (b.probe_layer < 0) {
      b.probe_layer = static_cast<int>(l);
      add_rows("probe", model.probe_graph(), probe_ops[l], b.rows);
    }
  }
  if (head_ops.empty())
    return b;  // timing_scope block_only: no head
  b.head_ns = path_of(model.head_graph(), head_ops);
  add_rows("head", model.head_graph(), head_ops, b.rows);
  return b;
}

// 1234567 -> "1.235M": FLOPs and bytes at a glance.
std::string si(double value) {
  static constexpr std::string_view k_prefix[] = {"", "K", "M", "G", "T", "P", "E"};
  std::size_t at = 0;
  while (std::abs(value) >= 999.95 && at + 1 < std::size(k_prefix)) {
    value /= 1000;
    ++at;
  }
  return fmt::format("{:.4g}{}", value, k_prefix[at]);
}

double intensity(const sim::OpCost& op) {
  return op.communication || op.bytes <= 0 ? 0.0 : op.flops / op.bytes;
}

double us(double ns) {
  return ns / 1000.0;
}

// What the command prints, gathered before anything is: a failure prints nothing.
struct CostReport {
  sim::ReplicaSpec spec;
  std::string group_note;  // which group, when the scenario has several
  std::vector<sim::BatchEntry> batch;
  Breakdown breakdown;
  scenario::CostModelConfig roofline;  // the settings of the roofline that priced the ops
  sim::IterationCost total;            // the roofline's iteration_cost
  // A measured cost model's price of the same iteration (cost_model.kind not roofline).
  bool measured = false;
  sim::IterationCost measured_total;
  std::vector<std::string> measured_notes;  // where its price is not a measurement
};

std::string hardware_line(const sim::ReplicaSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  if (p.gpus() == 1)
    return spec.hardware.name;
  return fmt::format("{} x {} (TP {}{}{}): every op is one GPU's shard", p.gpus(),
                     spec.hardware.name, p.tensor,
                     p.pipeline > 1 ? fmt::format(", PP {}", p.pipeline) : std::string(),
                     p.expert > 1 ? fmt::format(", EP {}", p.expert) : std::string());
}

std::string batch_line(const CostArgs& args, const CostReport& r) {
  std::string parts;
  if (given(args.prefill_option)) {
    parts = fmt::format("a prefill of {} tokens after {} cached", args.prefill,
                        given(args.prefill_context_option) ? args.prefill_context : args.context);
  }
  if (given(args.decode_option)) {
    const int stacked = r.spec.model.depth.stacked_depth();
    parts += fmt::format("{}{} decode sequences at context {}{}", parts.empty() ? "" : " + ",
                         args.decode, args.context,
                         given(args.depth_option) && args.depth < stacked
                             ? fmt::format(", exiting after {} of {} stacked layers ({})",
                                           args.depth, stacked, r.spec.sync.strategy)
                             : std::string(", at the full depth"));
  }
  return parts;
}

std::string format_table(const CostArgs& args, const CostReport& r) {
  const ModelShape& m = r.spec.model;
  const scenario::CostModelConfig& c = r.spec.cost_model;
  const Breakdown& b = r.breakdown;
  std::string out;
  out += fmt::format("model      {} ({}), {} layers ({} stacked + {} coda), exit policy {}\n",
                     m.name, to_string(m.dtype), m.depth.full_depth(), m.depth.stacked_depth(),
                     m.depth.coda_layers, r.spec.exit_policy.kind);
  out += fmt::format("hardware   {}\n", hardware_line(r.spec));
  out += fmt::format("cost model roofline: flops_efficiency {:g}, bandwidth_efficiency {:g}{}\n",
                     r.roofline.flops_efficiency, r.roofline.bandwidth_efficiency,
                     r.measured ? " (the roofline's defaults)" : "");
  if (r.measured) {
    out += fmt::format(
        "note       cost_model.kind is {}: the per-op breakdown is the roofline's (a measured "
        "model does not price ops one by one); the {} model's iteration total is beside the "
        "roofline's below\n",
        c.kind, c.kind);
  }
  if (!r.group_note.empty())
    out += fmt::format("group      {}\n", r.group_note);
  out += fmt::format("batch      {}\n", batch_line(args, r));
  if (r.spec.sync.strategy == "depthwise") {
    out +=
        "note       sync.strategy depthwise prices one recursion per step; this is the "
        "unrolled iteration, every sequence through its layers in one step\n";
  }
  out +=
      fmt::format("\n  {:<18} {:>12} {:>10} {:>10} {:>10} {:>10}  {:<15}  {}\n", "op",
                  "duration us", "launch us", "FLOPs", "bytes", "FLOP/byte", "bound", "parameter");
  // "32", or "11 of 29" when the decode sequences exit and no other entry runs the rest.
  const int layers = c.timing_scope == "block_only"
                         ? m.depth.stacked_depth() - sim::block_only_first_layer(m.depth)
                         : m.depth.full_depth();
  const std::string layers_run = b.layers_run == layers
                                     ? std::to_string(layers)
                                     : fmt::format("{} of {}", b.layers_run, layers);
  std::string_view section;
  for (const Row& row : b.rows) {
    if (row.section != section) {
      section = row.section;
      if (section == "layer") {
        out += b.layers_differ
                   ? fmt::format("layer 0 (one of the {} layers that run; their prices differ)\n",
                                 layers_run)
                   : fmt::format("layer 0 (x {} layers)\n", layers_run);
      } else if (section == "kv_only") {
        out += fmt::format("K/V-only projection of copied exit states, layer {} (x {} {})\n",
                           row.op.layer, b.kv_layers, b.kv_layers == 1 ? "layer" : "layers");
      } else if (section == "probe") {
        out += fmt::format("exit probe after layer {} (x {} exit {})\n", b.probe_layer + 1,
                           b.probe_points, b.probe_points == 1 ? "point" : "points");
      } else {
        out += "head\n";
      }
    }
    const sim::OpCost& op = row.op;
    const double ai = intensity(op);
    // A collective's link bytes are in its time, not in OpCost: its FLOPs and bytes are blank.
    out += fmt::format("  {:<18} {:>12.3f} {:>10.3f} {:>10} {:>10} {:>10}  {:<15}  {}\n",
                       sim::to_string(op.kind), us(op.duration_ns), us(op.launch_ns),
                       op.communication ? "-" : si(op.flops), op.communication ? "-" : si(op.bytes),
                       ai > 0 ? fmt::format("{:.1f}", ai) : "-", sim::to_string(op.bound),
                       op.parameter);
  }
  out += "\n";
  const bool pipelined = r.spec.parallel.pipeline > 1;
  if (b.layers_differ) {
    out += fmt::format(
        "layers     {:.3f} us at layer 0; {:.3f} us over the {} layers that run (their "
        "prices differ: the table shows layer 0)\n",
        us(b.layer0_ns), us(b.layers_ns), layers_run);
  } else {
    out += fmt::format("layers     {:.3f} us per layer x {} layers = {:.3f} us\n", us(b.layer0_ns),
                       layers_run, us(b.layers_ns));
  }
  if (b.probe_points > 0) {
    out += fmt::format("probes     {:.3f} us over {} exit {}\n", us(b.probes_ns), b.probe_points,
                       b.probe_points == 1 ? "point" : "points");
  }
  out += fmt::format("head       {:.3f} us\n", us(b.head_ns));
  if (pipelined) {
    out += fmt::format(
        "pipeline   {} stages: the rows and sums above are the whole batch on one GPU of its "
        "stage; the iteration below is the pipelined step (the batch in micro-batches cycling "
        "through the stages, with activation hand-offs), not their sum\n",
        r.spec.parallel.pipeline);
  }
  const sim::IterationCost& t = r.total;
  out += fmt::format(
      "iteration  {:.3f} us = compute {:.3f} + memory {:.3f} + communication {:.3f} + launch "
      "overhead {:.3f} (roofline); {} FLOPs, {} bytes\n",
      us(static_cast<double>(t.total)), us(static_cast<double>(t.compute_bound)),
      us(static_cast<double>(t.memory_bound)), us(static_cast<double>(t.communication)),
      us(static_cast<double>(t.overhead)), si(t.flops), si(t.bytes));
  if (r.measured) {
    out += fmt::format("measured   {:.3f} us ({} model, {})\n",
                       us(static_cast<double>(r.measured_total.total)), c.kind, c.profile);
    for (const std::string& note : r.measured_notes)
      out += fmt::format("note       {}\n", note);
  }
  const std::string scope = sim::timing_scope_note(sim::timing_scope_from(c.timing_scope),
                                                   r.measured ? c.kind : "roofline");
  if (!scope.empty())
    out += fmt::format("note       {}\n", scope);
  if (c.price_scale != 1.0) {
    out += fmt::format(
        "note       cost_model.price_scale {:g}: the simulator times this iteration at {:.3f} "
        "us\n",
        c.price_scale,
        us(static_cast<double>(r.measured ? r.measured_total.total : t.total) * c.price_scale));
  }
  return out;
}

// The same table for machines: every op row, then the sums and the iteration's totals (section
// "total"), durations in microseconds at full precision.
std::string format_csv(const CostReport& r) {
  const Breakdown& b = r.breakdown;
  std::string out =
      "section,op,layer,count,duration_us,launch_us,flops,bytes,flop_per_byte,bound,parameter\n";
  for (const Row& row : b.rows) {
    const sim::OpCost& op = row.op;
    const int count = row.section == "layer"     ? b.layers_run
                      : row.section == "kv_only" ? b.kv_layers
                      : row.section == "probe"   ? b.probe_points
                                                 : 1;
    const double ai = intensity(op);
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},\"{}\"\n", row.section,
                       sim::to_string(op.kind), op.layer, count, us(op.duration_ns),
                       us(op.launch_ns), op.communication ? "" : fmt::format("{}", op.flops),
                       op.communication ? "" : fmt::format("{}", op.bytes),
                       ai > 0 ? fmt::format("{}", ai) : "", sim::to_string(op.bound), op.parameter);
  }
  // The sums: FLOPs and bytes only for a whole iteration.
  const auto total = [&](std::string_view name, int layer, int count, double ns,
                         const sim::IterationCost* counts = nullptr) {
    out += fmt::format("total,{},{},{},{},,{},{},,,\n", name, layer, count, us(ns),
                       counts != nullptr ? fmt::format("{}", counts->flops) : "",
                       counts != nullptr ? fmt::format("{}", counts->bytes) : "");
  };
  total("layer", 0, 1, b.layer0_ns);
  total("layers", -1, b.layers_run, b.layers_ns);
  total("probes", -1, b.probe_points, b.probes_ns);
  total("head", -1, 1, b.head_ns);
  const sim::IterationCost& t = r.total;
  total("iteration", -1, 1, static_cast<double>(t.total), &t);
  total("compute", -1, 1, static_cast<double>(t.compute_bound));
  total("memory", -1, 1, static_cast<double>(t.memory_bound));
  total("communication", -1, 1, static_cast<double>(t.communication));
  total("overhead", -1, 1, static_cast<double>(t.overhead));
  if (r.measured) {
    total("measured_iteration", -1, 1, static_cast<double>(r.measured_total.total),
          &r.measured_total);
  }
  return out;
}

void run_cost(const CostArgs& args) {
  check_options(args);
  const scenario::Scenario s = args.scenario.load();
  const auto groups = static_cast<int>(s.replica_groups.size());
  if (args.group >= groups) {
    throw_setting_error("--group", fmt::format("a replica group index in [0, {})", groups),
                        std::to_string(args.group));
  }
  // The replica spec the simulator builds for the group's first replica: the one adapter from
  // scenario to cost model inputs.
  std::size_t first = 0;
  for (int g = 0; g < args.group; ++g)
    first += static_cast<std::size_t>(s.replica_groups[static_cast<std::size_t>(g)].count);
  CostReport r;
  r.spec = sim::simulation_config_from(s, "").replicas.at(first);
  if (groups > 1) {
    r.group_note = fmt::format("{} of {} replica groups (--group)", args.group, groups);
  }
  r.batch = make_batch(args, r.spec);

  // The roofline as make_cost_model builds it for this replica, whatever cost_model.kind says.
  // A measured model's scenario has no efficiency keys (they are the roofline's): the
  // roofline's defaults price its ops.
  scenario::CostModelConfig roofline_config = r.spec.cost_model;
  if (roofline_config.kind != "roofline") {
    roofline_config.kind = "roofline";
    roofline_config.flops_efficiency = sim::RooflineEfficiency{}.flops;
    roofline_config.bandwidth_efficiency = sim::RooflineEfficiency{}.bandwidth;
  }
  r.roofline = roofline_config;
  const std::unique_ptr<sim::CostModel> model =
      sim::make_cost_model(roofline_config, r.spec.model, r.spec.hardware, r.spec.parallel,
                           sim::prices_exit_probes(r.spec.exit_policy));
  const auto* roofline = dynamic_cast<const sim::RooflineCostModel*>(model.get());
  if (roofline == nullptr)
    throw std::logic_error("exitsim cost: make_cost_model built no roofline for kind roofline");
  r.breakdown = break_down(*roofline, r.batch);
  r.total = roofline->iteration_cost(r.batch);
  if (r.spec.cost_model.kind != "roofline") {
    const std::unique_ptr<sim::CostModel> measured =
        sim::make_cost_model(r.spec.cost_model, r.spec.model, r.spec.hardware, r.spec.parallel,
                             sim::prices_exit_probes(r.spec.exit_policy));
    r.measured = true;
    r.measured_total = measured->iteration_cost(r.batch);
    r.measured_notes = measured->notes();
  }

  const std::string csv = format_csv(r);
  if (args.format == "csv")
    fmt::print("{}", csv);
  else
    fmt::print("{}", format_table(args, r));
  if (!args.out.empty()) {
    make_output_file_folder(args.out);
    traces::write_file_atomically(args.out, csv);
    if (args.format != "csv")
      fmt::print("wrote      {}\n", args.out);
  }
}

}  // namespace

void add_cost_command(CLI::App& app) {
  auto args = std::make_shared<CostArgs>();
  CLI::App* command = app.add_subcommand(
      "cost",
      "Price one iteration op by op (the roofline): each op's duration, launch, FLOPs, bytes, "
      "what bound it and the scenario key that set it, then the iteration's totals");
  args->scenario.add_to(*command);
  args->decode_option =
      command->add_option("--decode", args->decode,
                          "Decode sequences in the batch, one query token each (default: none)");
  args->prefill_option = command->add_option(
      "--prefill", args->prefill, "Prefill tokens in the batch, one prompt (default: none)");
  command->add_option("--context", args->context,
                      "Tokens already in K/V for every sequence of the batch");
  args->prefill_context_option = command->add_option(
      "--prefill-context", args->prefill_context,
      "Tokens already in K/V for the prefill, when not --context (default: --context)");
  args->depth_option = command->add_option(
      "--depth", args->depth,
      "The decode sequences exit after this many stacked layers, as the scenario's sync.strategy "
      "plans it (default: the full depth)");
  command->add_option("--group", args->group,
                      "The replica group to price, when the scenario has several");
  command->add_option("--format", args->format,
                      "What stdout gets: table (for people) or csv (the table for machines)");
  command->add_option("-o,--out", args->out, "Also write the table as CSV to this file");
  command->callback([args] { run_cost(*args); });
}

}  // namespace exitsim::cli
