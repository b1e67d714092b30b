// `exitsim cost` against its oracle: the rows it prints are RooflineCostModel::op_breakdown's for
// the same model, hardware, parallelism and batch (built here from the presets, not from the
// command's code), its total is iteration_cost's, and every user error is one line.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/cli_fixture.hpp"

namespace {

using namespace cli_support;
using namespace exitsim;
using exitsim::sim::BatchEntry;
using exitsim::sim::OpCost;
namespace fs = std::filesystem;

// One CSV row by column name (the parameter cell is quoted: it may hold commas).
using CsvRow = std::map<std::string, std::string>;

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (const char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      cells.emplace_back();
    else
      cells.back() += c;
  }
  return cells;
}

std::vector<CsvRow> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(split_csv_line(text.substr(start, end - start)));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  std::vector<CsvRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].size(), lines[0].size()) << "row " << i;
    CsvRow row;
    for (std::size_t c = 0; c < lines[0].size() && c < lines[i].size(); ++c)
      row[lines[0][c]] = lines[i][c];
    rows.push_back(row);
  }
  return rows;
}

std::vector<CsvRow> section(const std::vector<CsvRow>& rows, const std::string& name) {
  std::vector<CsvRow> out;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(out),
               [&](const CsvRow& r) { return r.at("section") == name; });
  return out;
}

double number(const CsvRow& row, const std::string& column) {
  return std::strtod(row.at(column).c_str(), nullptr);
}

double total(const std::vector<CsvRow>& rows, const std::string& name) {
  for (const CsvRow& r : section(rows, "total")) {
    if (r.at("op") == name)
      return number(r, "duration_us");
  }
  ADD_FAILURE() << "no total " << name;
  return -1;
}

// The oracle's launched ops of one layer (or -1: the head) in its graph's topological order, as
// the command lists them.
std::vector<OpCost> launched(const std::vector<OpCost>& ops, int layer, const sim::OpGraph& graph) {
  std::vector<OpCost> of_layer;
  for (const OpCost& op : ops) {
    const bool probe = op.kind == sim::OpKind::probe_norm || op.kind == sim::OpKind::probe_head ||
                       op.kind == sim::OpKind::probe_softmax ||
                       op.kind == sim::OpKind::probe_reduce;
    if (op.layer == layer && !probe && op.kind != sim::OpKind::kv_projection)
      of_layer.push_back(op);
  }
  EXPECT_EQ(static_cast<int>(of_layer.size()), graph.size());
  std::vector<OpCost> out;
  for (const int v : graph.topological_order()) {
    if (of_layer[static_cast<std::size_t>(v)].launched)
      out.push_back(of_layer[static_cast<std::size_t>(v)]);
  }
  return out;
}

// Every printed row of `name` equals the oracle's op: kind, duration, launch, FLOPs, bytes,
// bound and parameter (durations in microseconds at full precision, so exactly).
void expect_rows_equal(const std::vector<CsvRow>& rows, const std::vector<OpCost>& oracle) {
  ASSERT_EQ(rows.size(), oracle.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OpCost& op = oracle[i];
    SCOPED_TRACE(std::string(sim::to_string(op.kind)));
    EXPECT_EQ(rows[i].at("op"), sim::to_string(op.kind));
    EXPECT_EQ(number(rows[i], "duration_us"), op.duration_ns / 1000.0);
    EXPECT_EQ(number(rows[i], "launch_us"), op.launch_ns / 1000.0);
    if (!op.communication) {
      EXPECT_EQ(number(rows[i], "flops"), op.flops);
      EXPECT_EQ(number(rows[i], "bytes"), op.bytes);
    }
    EXPECT_EQ(rows[i].at("bound"), sim::to_string(op.bound));
    EXPECT_EQ(rows[i].at("parameter"), op.parameter);
  }
}

ModelShape model_preset(const std::string& name) {
  const auto model = find_model_preset(name);
  EXPECT_TRUE(model.has_value()) << name;
  return model.value_or(ModelShape{});
}

HardwareSpec hardware_preset(const std::string& name) {
  const auto hardware = find_hardware_preset(name);
  EXPECT_TRUE(hardware.has_value()) << name;
  return hardware.value_or(HardwareSpec{});
}

std::vector<BatchEntry> decode_batch(std::int64_t sequences, std::int64_t context, int depth) {
  BatchEntry e;
  e.query_tokens = 1;
  e.context_tokens = context;
  e.depth = depth;
  e.emits_token = true;
  return std::vector<BatchEntry>(static_cast<std::size_t>(sequences), e);
}

BatchEntry prefill_entry(std::int64_t tokens, std::int64_t context, int depth) {
  BatchEntry e;
  e.query_tokens = tokens;
  e.context_tokens = context;
  e.depth = depth;
  e.emits_token = true;
  return e;
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

constexpr const char* k_tp8 =
    "cost --set model.preset=llama-3.1-70b --set hardware.preset=a100-80gb --set "
    "parallel.tensor=8 --decode 32 --context 2048";

// The 70B model over 8 A100s: every layer-0 and head row is op_breakdown's, the all-reduces and
// the logits gather are collectives over the link, and the total is iteration_cost's.
TEST_F(Cli, CostRowsAreTheRooflinesOpBreakdownUnderTensorParallelism) {
  const Result r = run(std::string(k_tp8) + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<CsvRow> rows = parse_csv(r.out);

  const ModelShape model = model_preset("llama-3.1-70b");
  const sim::RooflineCostModel oracle(model, hardware_preset("a100-80gb"), {0.7, 0.85},
                                      ParallelSpec{8, 1, 1});
  const std::vector<BatchEntry> batch = decode_batch(32, 2048, model.depth.stacked_depth());
  const std::vector<OpCost> ops = oracle.op_breakdown(batch);
  expect_rows_equal(section(rows, "layer"), launched(ops, 0, oracle.layer_graph()));
  expect_rows_equal(section(rows, "head"), launched(ops, -1, oracle.head_graph()));

  // Two all-reduces per layer (after the attention output and after the MLP) and the logits'
  // gather: collectives, priced by the link keys (the latency for a decode step's small
  // all-reduce, the bandwidth for the gather of 32 x 128k logits); nothing else is.
  std::vector<std::string> collectives;
  for (const CsvRow& row : rows) {
    if (row.at("section") != "total" && row.at("bound") == "collective") {
      collectives.push_back(row.at("op"));
      EXPECT_EQ(row.at("parameter"),
                row.at("op") == "tp_all_reduce"
                    ? "hardware.link_latency_us"
                    : "hardware.link_bandwidth_gbps, hardware.link_efficiency");
    }
  }
  EXPECT_EQ(collectives,
            (std::vector<std::string>{"tp_all_reduce", "tp_all_reduce", "logits_gather"}));
  const sim::IterationCost cost = oracle.iteration_cost(batch);
  EXPECT_GT(cost.communication, 0);
  EXPECT_EQ(total(rows, "iteration"), static_cast<double>(cost.total) / 1000.0);
  EXPECT_EQ(total(rows, "communication"), static_cast<double>(cost.communication) / 1000.0);
  EXPECT_EQ(total(rows, "compute"), static_cast<double>(cost.compute_bound) / 1000.0);
  EXPECT_EQ(total(rows, "memory"), static_cast<double>(cost.memory_bound) / 1000.0);
  EXPECT_EQ(total(rows, "overhead"), static_cast<double>(cost.overhead) / 1000.0);
  // Without pipeline stages the iteration is every layer's critical path and the head's: the
  // table's sums add up to it (to iteration_cost's rounding to whole nanoseconds).
  EXPECT_NEAR(total(rows, "layers") + total(rows, "head"), total(rows, "iteration"), 1e-3);
  EXPECT_NEAR(total(rows, "layers"), 80 * total(rows, "layer"), 1e-6);

  // The table for people says the same, rounded to nanoseconds.
  const Result table = run(k_tp8);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("hardware   8 x a100-80gb (TP 8)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("layer 0 (x 80 layers)"), std::string::npos) << table.out;
  EXPECT_NE(
      table.out.find(fmt::format("iteration  {:.3f} us", static_cast<double>(cost.total) / 1000.0)),
      std::string::npos)
      << table.out;
  int all_reduce_lines = 0;
  for (std::size_t at = table.out.find("tp_all_reduce"); at != std::string::npos;
       at = table.out.find("tp_all_reduce", at + 1)) {
    const std::string line = table.out.substr(at, table.out.find('\n', at) - at);
    EXPECT_NE(line.find("collective"), std::string::npos) << line;
    ++all_reduce_lines;
  }
  EXPECT_EQ(all_reduce_lines, 2);
}

// A long prefill's GEMMs are compute-bound (priced by cost_model.flops_efficiency), a single
// decode sequence's memory-bound (cost_model.bandwidth_efficiency); halving the flops efficiency
// doubles the first's time past the launch and leaves the second's alone. On the bare roofline
// (no ridge blend, no minimum kernel time), where the bound alone sets the price.
TEST_F(Cli, CostPrefillGemmsAreComputeBoundAndASingleDecodesMemoryBound) {
  const auto gemms = [&](const std::string& args) {
    const Result r = run("cost " + args +
                         " --set hardware.ridge_exponent=0 --set hardware.min_kernel_us=0 "
                         "--format csv");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, CsvRow> by_op;
    for (const CsvRow& row : section(parse_csv(r.out), "layer")) {
      if (row.at("op") == "qkv_projection" || row.at("op") == "output_projection" ||
          row.at("op") == "mlp_gate_up" || row.at("op") == "mlp_down")
        by_op[row.at("op")] = row;
    }
    EXPECT_EQ(by_op.size(), 4U) << r.out;
    return by_op;
  };
  const auto body = [](const CsvRow& row) {
    return number(row, "duration_us") - number(row, "launch_us");
  };
  const auto prefill = gemms("--prefill 4096");
  const auto prefill_slow = gemms("--prefill 4096 --set cost_model.flops_efficiency=0.35");
  const auto decode = gemms("--decode 1 --context 1024");
  const auto decode_slow =
      gemms("--decode 1 --context 1024 --set cost_model.flops_efficiency=0.35");
  for (const auto& [op, row] : prefill) {
    SCOPED_TRACE(op);
    EXPECT_EQ(row.at("bound"), "compute");
    EXPECT_EQ(row.at("parameter"), "cost_model.flops_efficiency");
    EXPECT_GT(number(row, "flop_per_byte"), 500);
    EXPECT_NEAR(body(prefill_slow.at(op)), 2 * body(row), 1e-9 * body(row));
    EXPECT_EQ(decode.at(op).at("bound"), "memory");
    EXPECT_EQ(decode.at(op).at("parameter"), "cost_model.bandwidth_efficiency");
    EXPECT_LT(number(decode.at(op), "flop_per_byte"), 2);
    EXPECT_EQ(decode_slow.at(op).at("duration_us"), decode.at(op).at("duration_us"));
  }
}

// A prefill beside decode sequences: one batch with both attentions, each op as op_breakdown
// prices that batch; the prefill has its own cached tokens.
TEST_F(Cli, CostPricesAMixedBatchAsOneIteration) {
  const Result r =
      run("cost --prefill 512 --prefill-context 100 --decode 8 --context 1000 "
          "--format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CsvRow> rows = parse_csv(r.out);
  const ModelShape model = model_preset("llama-3-8b");
  const sim::RooflineCostModel oracle(model, hardware_preset("h100-sxm"), {0.7, 0.85});
  const int depth = model.depth.stacked_depth();
  std::vector<BatchEntry> batch = decode_batch(8, 1000, depth);
  batch.insert(batch.begin(), prefill_entry(512, 100, depth));
  const std::vector<OpCost> ops = oracle.op_breakdown(batch);
  expect_rows_equal(section(rows, "layer"), launched(ops, 0, oracle.layer_graph()));
  int attentions = 0;
  for (const CsvRow& row : section(rows, "layer")) {
    if (row.at("op") == "attention_prefill" || row.at("op") == "attention_decode")
      ++attentions;
  }
  EXPECT_EQ(attentions, 2);
  EXPECT_EQ(total(rows, "iteration"),
            static_cast<double>(oracle.iteration_cost(batch).total) / 1000.0);
  // The prefill's context is its own: at --context 1000 it is priced higher.
  const Result same = run("cost --prefill 512 --decode 8 --context 1000 --format csv");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_GT(total(parse_csv(same.out), "iteration"), total(rows, "iteration"));
}

// Pipeline stages: the rows are the whole batch through layer 0, the total is the pipelined
// step iteration_cost gives, which is not the layers' sum, and the table says so.
TEST_F(Cli, CostUnderPipelineParallelismTotalsThePipelinedStep) {
  const std::string args = "cost --set parallel.pipeline=2 --decode 16 --context 512";
  const Result r = run(args + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CsvRow> rows = parse_csv(r.out);
  const ModelShape model = model_preset("llama-3-8b");
  const sim::RooflineCostModel oracle(model, hardware_preset("h100-sxm"), {0.7, 0.85},
                                      ParallelSpec{1, 2, 1});
  const std::vector<BatchEntry> batch = decode_batch(16, 512, model.depth.stacked_depth());
  expect_rows_equal(section(rows, "layer"),
                    launched(oracle.op_breakdown(batch), 0, oracle.layer_graph()));
  const double step = static_cast<double>(oracle.iteration_cost(batch).total) / 1000.0;
  EXPECT_EQ(total(rows, "iteration"), step);
  EXPECT_GT(std::abs(total(rows, "layers") + total(rows, "head") - step), 1.0);
  const Result table = run(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("pipeline   2 stages: the rows and sums above are the whole batch"),
            std::string::npos)
      << table.out;
}

// cost_model.timing_scope block_only on MoR-3: the rows are op_breakdown's of a block-only
// roofline (the block's first layer is layer 1: layer 0 is the prelude), there is no head row,
// the total is the block-only iteration_cost, 30 layers are priced (10 x 3 recursions) and the
// table says these are block times.
TEST_F(Cli, CostUnderABlockOnlyScopeListsTheBlockAlone) {
  const std::string args =
      "cost --set model.preset=mor-smollm-360m-r3 --set cost_model.timing_scope=block_only "
      "--decode 32 --context 128";
  const Result r = run(args + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CsvRow> rows = parse_csv(r.out);
  const ModelShape model = model_preset("mor-smollm-360m-r3");
  const sim::RooflineCostModel oracle(model, hardware_preset("h100-sxm"), {0.7, 0.85}, {}, false,
                                      sim::TimingScope::block_only);
  const std::vector<BatchEntry> batch = decode_batch(32, 128, model.depth.stacked_depth());
  expect_rows_equal(section(rows, "layer"),
                    launched(oracle.op_breakdown(batch), 1, oracle.layer_graph()));
  EXPECT_TRUE(section(rows, "head").empty());
  EXPECT_EQ(total(rows, "iteration"),
            static_cast<double>(oracle.iteration_cost(batch).total) / 1000.0);
  const Result table = run(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("x 30 layers"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("block times, not step times"), std::string::npos) << table.out;
}

// Early exits under state_copy with confidence probes: the decode sequences leave after layer
// 8, the layers above compute only the K/V of their copied states (its own row, x 24 layers), a
// probe runs after layer 8 only, the layers' prices differ and the table says it shows layer 0.
TEST_F(Cli, CostOfAnEarlyExitShowsTheKvOnlyProjectionAndTheProbe) {
  const std::string args =
      "cost --set exit_policy.kind=confidence --set sync.strategy=state_copy --set "
      "'model.depth.exit_points=[8,16,24,32]' --decode 4 --context 500 --depth 8";
  const Result r = run(args + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CsvRow> rows = parse_csv(r.out);
  ModelShape model = model_preset("llama-3-8b");
  model.depth.exit_points = {8, 16, 24, 32};
  const sim::RooflineCostModel oracle(model, hardware_preset("h100-sxm"), {0.7, 0.85}, {},
                                      /*exit_probes=*/true);
  std::vector<BatchEntry> batch = decode_batch(4, 500, 8);
  for (BatchEntry& e : batch)
    e.kv_only_depth = 32;
  const std::vector<OpCost> ops = oracle.op_breakdown(batch);
  const std::vector<CsvRow> kv = section(rows, "kv_only");
  ASSERT_EQ(kv.size(), 1U) << r.out;
  EXPECT_EQ(kv[0].at("layer"), "8");
  EXPECT_EQ(kv[0].at("count"), "24");
  for (const OpCost& op : ops) {
    if (op.kind == sim::OpKind::kv_projection && op.layer == 8) {
      EXPECT_EQ(number(kv[0], "duration_us"), op.duration_ns / 1000.0);
    }
  }
  const std::vector<CsvRow> probe = section(rows, "probe");
  ASSERT_FALSE(probe.empty());
  EXPECT_EQ(probe[0].at("layer"), "7");
  EXPECT_EQ(probe[0].at("count"), "1");
  EXPECT_EQ(total(rows, "iteration"),
            static_cast<double>(oracle.iteration_cost(batch).total) / 1000.0);
  EXPECT_NEAR(total(rows, "layers") + total(rows, "probes") + total(rows, "head"),
              total(rows, "iteration"), 1e-3);
  const Result table = run(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("their prices differ: the table shows layer 0"), std::string::npos)
      << table.out;
}

// A measured cost model: the breakdown is the roofline's at its default efficiencies, and the
// measured model's own price of the same batch is printed beside it.
TEST_F(Cli, CostWithAMeasuredModelPrintsItsTotalBesideTheRooflines) {
  const Result r =
      run("cost scenarios/examples/rrt_gemma.yaml --decode 64 --context 512 "
          "--format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<CsvRow> rows = parse_csv(r.out);
  const ModelShape model = model_preset("gemma-2b");
  const HardwareSpec hardware = hardware_preset("a100-40gb");
  const std::vector<BatchEntry> batch = decode_batch(64, 512, model.depth.stacked_depth());
  const sim::RooflineCostModel roofline(model, hardware, sim::RooflineEfficiency{});
  expect_rows_equal(section(rows, "layer"),
                    launched(roofline.op_breakdown(batch), 0, roofline.layer_graph()));
  scenario::CostModelConfig table;
  table.kind = "table";
  table.profile =
      (fs::path(EXITSIM_SOURCE_DIR) / "scenarios/examples/rrt_gemma_a100_costs.csv").string();
  const double measured =
      static_cast<double>(
          sim::make_cost_model(table, model, hardware)->iteration_cost(batch).total) /
      1000.0;
  EXPECT_EQ(total(rows, "measured_iteration"), measured);
  EXPECT_GT(std::abs(measured - total(rows, "iteration")), 1.0);  // two different prices

  const Result text = run("cost scenarios/examples/rrt_gemma.yaml --decode 64 --context 512");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("note       cost_model.kind is table: the per-op breakdown is the "
                          "roofline's"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(fmt::format("measured   {:.3f} us (table model", measured)),
            std::string::npos)
      << text.out;
}

// The same command prints the same bytes, and -o writes what --format csv prints.
TEST_F(Cli, CostIsDeterministicAndItsCsvFileIsItsCsvOutput) {
  const fs::path out = dir_ / "sub" / "cost.csv";
  const Result first = run(std::string(k_tp8) + " -o '" + out.string() + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const Result second = run(k_tp8);
  EXPECT_EQ(second.out + "wrote      " + out.string() + "\n", first.out);
  const Result csv = run(std::string(k_tp8) + " --format csv");
  EXPECT_EQ(slurp(out), csv.out);
}

// Every user error: one line naming the option or key, expected and found, exit 1, nothing on
// stdout and no output file.
TEST_F(Cli, CostRefusesBadOptionsInOneLine) {
  const fs::path out = dir_ / "cost.csv";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "--decode: expected a batch to price"},
      {"--decode 0", "--decode: expected 1 to 1048576 sequences, found 0"},
      {"--decode 100000000000", "--decode: expected 1 to 1048576 sequences, found 100000000000"},
      {"--prefill -4", "--prefill: expected 1 to 2147483647 tokens, found -4"},
      {"--decode 2 --context -1", "--context: expected 0 to 2147483647 cached tokens, found -1"},
      {"--decode 2 --format tabel",
       "--format: expected one of table, csv, found \"tabel\"; did you mean \"table\"?"},
      {"--decode 2 --prefill-context 5", "--prefill-context: expected --prefill beside it"},
      {"--prefill 8 --depth 4", "--depth: expected --decode beside it"},
      {"--decode 2 --depth 4", "--depth: expected a sync.strategy that lets tokens exit"},
      {"--decode 2 --depth 40 --set sync.strategy=batch_sync",
       "--depth: expected an exit depth in [1, 32]"},
      {"--decode 2 --group 1", "--group: expected a replica group index in [0, 1), found 1"},
      {"--decode 2 --context 8192",
       "--context: expected a decode context below model.max_context (8192), found 8192"},
      {"--prefill 8000 --context 500",
       "--prefill: expected cached and prefill tokens within model.max_context (8192), found "
       "500 + 8000"},
      {"--decode 2 --set model.preset=nope", "--set: model.preset: expected one of"},
      {"--decode 2 --set cost_model.flops_efficiency=0", "cost_model.flops_efficiency"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const Result r = run("cost " + args + " -o '" + out.string() + "'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("exitsim: error: ", 0), 0U) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // A folder that cannot be made is refused before any pricing.
  const fs::path blocker = file("blocker", "");
  const Result folder = run("cost --decode 2 -o '" + (blocker / "cost.csv").string() + "'");
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_NE(folder.err.find("--out: expected a directory that can be created"), std::string::npos)
      << folder.err;
  EXPECT_EQ(count_lines(folder.err), 1);
}

}  // namespace
