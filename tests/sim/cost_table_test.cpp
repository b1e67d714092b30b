// The per-op cost table (cost_model.kind: table): the strict reader, interpolation, the pricing
// rules of docs/cost_model.md ("Per-op cost tables") and the RRT worked example.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::sim {
namespace {

namespace fs = std::filesystem;

const std::string k_head = "# exitsim-cost-table v1\nop,batch,time_us\n";
// layer: 100 us at 1 token, +2 us per token up to 101; head: 50 -> 150; embedding flat 5 us.
const std::string k_base_rows =
    "layer,1,100\nlayer,101,300\nlm_head,1,50\nlm_head,101,150\nembedding,1,5\n";

CostTable parse(const std::string& text) {
  std::istringstream in(text);
  return CostTable::parse(in, "t.csv");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CostTableReader, ReadsRowsCommentsAndBlankLines) {
  const CostTable t = parse(
      "# exitsim-cost-table v1\r\n# measured on a test rig\n\nop, batch, time_us\r\n"
      "layer,1,100\n  layer , 8 , 120.5 \n# a comment between rows\nlm_head,1,50\n"
      "embedding,1,5\nprefill_layer_per_token,64,1.5\nkv_only_fraction,0,0.02\n");
  ASSERT_EQ(t.layer.size(), 2u);
  EXPECT_EQ(t.layer[1].batch, 8);
  EXPECT_DOUBLE_EQ(t.layer[1].time_us, 120.5);
  ASSERT_EQ(t.lm_head.size(), 1u);
  ASSERT_EQ(t.embedding.size(), 1u);
  ASSERT_EQ(t.prefill_layer_per_token.size(), 1u);
  EXPECT_EQ(t.prefill_layer_per_token[0].batch, 64);
  ASSERT_TRUE(t.kv_only_fraction.has_value());
  EXPECT_DOUBLE_EQ(*t.kv_only_fraction, 0.02);
  EXPECT_EQ(t.source, "t.csv");
}

TEST(CostTableReader, EveryMalformedCaseIsNamedExactly) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "t.csv:1: version: expected \"# exitsim-cost-table v1\", found end of file"},
      {"# exitsim-cost-table v2\n",
       "t.csv:1:1: version: expected \"# exitsim-cost-table v1\", found "
       "\"# exitsim-cost-table v2\""},
      {"op,batch,time_us\n",
       "t.csv:1:1: version: expected \"# exitsim-cost-table v1\", found \"op,batch,time_us\""},
      {"# exitsim-cost-table v1\n",
       "t.csv:2: header: expected the header \"op,batch,time_us\", found end of file"},
      {"# exitsim-cost-table v1\nop,tokens,time_us\n",
       "t.csv:2:4: header: expected column \"batch\", found \"tokens\""},
      {"# exitsim-cost-table v1\nop,batch\n",
       "t.csv:2:9: header: expected column \"time_us\", found end of line"},
      {"# exitsim-cost-table v1\nop,batch,time_us,note\n",
       "t.csv:2:18: header: expected 3 columns (op,batch,time_us), found 4"},
      {k_head + "layer,1\n", "t.csv:3:8: row: expected 3 fields (op,batch,time_us), found 2"},
      {k_head + "layer,1,2,3\n", "t.csv:3:11: row: expected 3 fields (op,batch,time_us), found 4"},
      {k_head + "attention,1,5\n",
       "t.csv:3:1: op: expected one of layer, lm_head, embedding, prefill_layer_per_token, "
       "kv_only_fraction, tp_all_reduce, pp_send_recv, pp_send_recv.remote, found "
       "\"attention\""},
      {k_head + "layer,1.5,10\n",
       "t.csv:3:7: batch: expected a whole number of tokens >= 1, found \"1.5\""},
      {k_head + "layer,0,10\n",
       "t.csv:3:7: batch: expected a whole number of tokens >= 1, found \"0\""},
      {k_head + "layer,,10\n",
       "t.csv:3:7: batch: expected a whole number of tokens >= 1, found an empty field"},
      {k_head + "layer,8,10\nlayer,4,9\n",
       "t.csv:4:7: batch: expected a batch above 8 (the rows of an op ascend by batch), "
       "found \"4\""},
      {k_head + "layer,8,10\nlayer,8,9\n",
       "t.csv:4:7: batch: expected a batch above 8 (the rows of an op ascend by batch), "
       "found \"8\""},
      {k_head + "layer,1,-3\n",
       "t.csv:3:9: time_us: expected a time in microseconds >= 0, found \"-3\""},
      {k_head + "layer,1,fast\n",
       "t.csv:3:9: time_us: expected a time in microseconds >= 0, found \"fast\""},
      {k_head + "layer,1,nan\n",
       "t.csv:3:9: time_us: expected a time in microseconds >= 0, found \"nan\""},
      {k_head + "kv_only_fraction,1,0.5\n",
       "t.csv:3:18: batch: expected batch 0 for kv_only_fraction, found \"1\""},
      {k_head + "kv_only_fraction,0,1.5\n",
       "t.csv:3:20: time_us: expected a fraction in [0, 1], found \"1.5\""},
      {k_head + "kv_only_fraction,0,0.1\nkv_only_fraction,0,0.2\n",
       "t.csv:4:1: op: expected one kv_only_fraction row (the first is on line 3), found a "
       "second"},
      {k_head + "layer,1,100\nembedding,1,5\n",
       "t.csv:5: op: expected at least one \"lm_head\" row, found none"},
      {k_head + "lm_head,1,100\nembedding,1,5\n",
       "t.csv:5: op: expected at least one \"layer\" row, found none"},
      {k_head + "layer,1,100\nlm_head,1,5\n# trailing comment\n",
       "t.csv:6: op: expected at least one \"embedding\" row, found none"},
  };
  for (const auto& [text, expected] : cases)
    EXPECT_EQ(error_of(text), expected) << text;
}

TEST(CostTableReader, ErrorsCarryTheFieldForTools) {
  try {
    parse(k_head + "layer,1,x\n");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "t.csv");
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.where().column, 9);
    EXPECT_EQ(e.where().field, "time_us");
  }
}

TEST(CostTableReader, UnreadablePathNamesTheProfileSetting) {
  try {
    CostTable::read("/nonexistent/exitsim/costs.csv");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().field, "cost_model.profile");
    EXPECT_EQ(e.where().file, "/nonexistent/exitsim/costs.csv");
  }
}

TEST(CostTableInterpolation, LinearBetweenPointsConstantOutside) {
  const std::vector<CostTable::Point> p = {{1, 100}, {11, 200}, {111, 1200}};
  EXPECT_DOUBLE_EQ(interpolate_us(p, 1), 100);
  EXPECT_DOUBLE_EQ(interpolate_us(p, 6), 150);
  EXPECT_DOUBLE_EQ(interpolate_us(p, 11), 200);
  EXPECT_DOUBLE_EQ(interpolate_us(p, 61), 700);
  EXPECT_DOUBLE_EQ(interpolate_us(p, 111), 1200);
  EXPECT_DOUBLE_EQ(interpolate_us(p, 0.5), 100);    // below the smallest: its time
  EXPECT_DOUBLE_EQ(interpolate_us(p, 5000), 1200);  // above the largest: its time
  const std::vector<CostTable::Point> one = {{8, 42}};
  EXPECT_DOUBLE_EQ(interpolate_us(one, 1), 42);
  EXPECT_DOUBLE_EQ(interpolate_us(one, 100), 42);
}

ModelShape preset(const char* name) {
  return *find_model_preset(name);
}

TimeNs us(double micros) {
  return static_cast<TimeNs>(micros * 1000.0);
}

BatchEntry decode(int depth) {
  return BatchEntry{1, 512, depth, true};
}

TEST(CostTablePricing, DecodeIsLayerTimesLayersPlusHeadPlusEmbedding) {
  const TableCostModel m(parse(k_head + k_base_rows), preset("gemma-2b"));
  EXPECT_EQ(m.name(), "table");
  const std::vector<BatchEntry> batch(4, decode(18));
  // layer(4) = 106 us over 18 layers, lm_head(4) = 53, embedding(4) = 5.
  EXPECT_EQ(m.iteration_cost(batch).total, us(18 * 106 + 53 + 5));
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{}).total, 0);
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{BatchEntry{0, 10, 18, false}}).total, 0);
}

TEST(CostTablePricing, FlatTableMakesDecodeTimeIndependentOfBatch) {
  const TableCostModel m(parse(k_head + "layer,1,1160\nlayer,111,1160\nlm_head,1,800\n"
                                        "embedding,1,80\n"),
                         preset("gemma-2b"));
  const TimeNs one = m.iteration_cost(std::vector<BatchEntry>{decode(18)}).total;
  EXPECT_EQ(one, us(18 * 1160 + 800 + 80));
  for (const std::size_t b : {std::size_t{2}, std::size_t{7}, std::size_t{64}, std::size_t{111},
                              std::size_t{300}, std::size_t{1000}}) {
    EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>(b, decode(18))).total, one) << b;
  }
}

TEST(CostTablePricing, PrefillUsesLayerTimeAtItsTokensWithoutAPrefillRow) {
  const TableCostModel m(parse(k_head + k_base_rows), preset("gemma-2b"));
  const BatchEntry prefill{50, 0, 18, true};
  // layer(50) = 198 us per layer; one emitting entry; 50 embedded tokens.
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{prefill}).total, us(18 * 198 + 50 + 5));
  // A mixed iteration runs decode and prefill tokens through one layer call: layer(53).
  std::vector<BatchEntry> mixed(3, decode(18));
  mixed.push_back(prefill);
  EXPECT_EQ(m.iteration_cost(mixed).total, us(18 * 204 + 53 + 5));
}

TEST(CostTablePricing, PrefillRowPricesPrefillTokensPerTokenBesideTheDecodeCall) {
  const TableCostModel m(
      parse(k_head + k_base_rows + "prefill_layer_per_token,1,3\nprefill_layer_per_token,37,2\n"),
      preset("gemma-2b"));
  const BatchEntry chunk{10, 0, 18, false};
  // 10 prefill tokens at 2.75 us each per layer; nothing emits, so no LM head.
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{chunk}).total, us(18 * 27.5 + 5));
  std::vector<BatchEntry> mixed(3, decode(18));
  mixed.push_back(chunk);
  // Per layer: layer(3) = 104 for the decodes plus 27.5 for the chunk; head for 3 emitters.
  EXPECT_EQ(m.iteration_cost(mixed).total, us(18 * (104 + 27.5) + 52 + 5));
}

TEST(CostTablePricing, EachLayerSeesTheTokensWhoseDepthCoversIt) {
  const TableCostModel m(parse(k_head + k_base_rows), preset("rrt-gemma-1b"));
  const std::vector<BatchEntry> batch = {decode(9), decode(18)};
  // Layers 1-9 run 2 tokens (102 us), layers 10-18 one (100 us); both emit.
  EXPECT_EQ(m.iteration_cost(batch).total, us(9 * 102 + 9 * 100 + 51 + 5));
}

TEST(CostTablePricing, StartDepthSkipsLowerLayersEmbeddingAndCoda) {
  ModelShape model = preset("smollm-135m");
  model.depth = DepthStructure{2, 2, 2, {}, 1, {}};  // stack of 6 layers, then one coda layer
  const TableCostModel m(parse(k_head + k_base_rows), model);
  BatchEntry resumed{1, 100, 6, false};
  resumed.start_depth = 3;
  // Layers 4-6 only: no coda, no embedding, no head.
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{resumed}).total, us(3 * 100));
  // Coda runs for every token that started at the bottom, whatever its depth.
  const std::vector<BatchEntry> batch = {decode(2), decode(6)};
  EXPECT_EQ(m.iteration_cost(batch).total, us(2 * 102 + 4 * 100 + 1 * 102 + 51 + 5));
}

TEST(CostTablePricing, TheCodaFieldOverridesTheStartRule) {
  ModelShape model = preset("smollm-135m");
  model.depth = DepthStructure{2, 2, 2, {}, 1, {}};
  const TableCostModel m(parse(k_head + k_base_rows), model);
  // A depth-wise token leaving the block at recursion 2 runs that recursion, the coda and the head.
  BatchEntry leaving{1, 100, 4, true};
  leaving.start_depth = 2;
  leaving.coda = BatchEntry::Coda::run;
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{leaving}).total, us(2 * 100 + 100 + 50));
  // One entering the block runs the prelude and recursion 1, and is embedded, but no coda yet.
  BatchEntry entering{1, 100, 4, false};
  entering.coda = BatchEntry::Coda::skip;
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{entering}).total, us(4 * 100 + 5));
}

TEST(CostTablePricing, PendingTokensJoinTheQueryAtTheirLayers) {
  const TableCostModel m(parse(k_head + k_base_rows), preset("gemma-2b"));
  BatchEntry fill = decode(18);
  fill.pending_tokens = 3;
  fill.pending_from_depth = 9;
  // Layers 1-9: the decode token alone; layers 10-18: one call of 4 queries (layer(4) = 106).
  EXPECT_EQ(m.iteration_cost(std::vector<BatchEntry>{fill}).total, us(9 * 100 + 9 * 106 + 50 + 5));
}

TEST(CostTablePricing, KvOnlyLayersCostTheTableFraction) {
  const TableCostModel m(parse(k_head + k_base_rows + "kv_only_fraction,0,0.25\n"),
                         preset("rrt-gemma-1b"));
  EXPECT_DOUBLE_EQ(m.kv_only_fraction(), 0.25);
  BatchEntry exited = decode(9);
  exited.kv_only_depth = 18;
  const std::vector<BatchEntry> batch = {exited, decode(18)};
  // Layers 10-18: layer(1) for the deep token plus 0.25 x layer(1) for the K/V-only one.
  EXPECT_EQ(m.iteration_cost(batch).total, us(9 * 102 + 9 * (100 + 25) + 51 + 5));
}

TEST(CostTablePricing, KvOnlyFractionDefaultsToTheKvWeightShare) {
  const ModelShape model = preset("gemma-2b");
  const TableCostModel m(parse(k_head + k_base_rows), model);
  const double share = 2.0 *
                       static_cast<double>(model.d_model * model.n_kv_heads * model.head_dim) /
                       static_cast<double>(model.layer_parameters());
  EXPECT_DOUBLE_EQ(m.kv_only_fraction(), share);
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 0.05);  // MQA: one K/V head of 256 against a 2048-wide layer
}

TEST(CostTablePricing, MaskedLayersAreTimedAndTheirFlopsReported) {
  const ModelShape model = preset("gemma-2b");
  const TableCostModel m(parse(k_head + k_base_rows), model);
  BatchEntry rider = decode(18);
  rider.useful_depth = 9;
  const std::vector<BatchEntry> batch = {rider, decode(18)};
  const IterationCost cost = m.iteration_cost(batch);
  EXPECT_EQ(cost.total, us(18 * 102 + 51 + 5));  // riders run (and are timed) to depth 18
  HardwareSpec counting;
  counting.set_peak_flops(model.dtype, 1e15);
  counting.memory_bandwidth = 1e12;
  const IterationCost reference =
      RooflineCostModel(model, counting, {1.0, 1.0}).iteration_cost(batch);
  EXPECT_GT(cost.masked_flops, 0.0);
  EXPECT_DOUBLE_EQ(cost.masked_flops, reference.masked_flops);
  EXPECT_DOUBLE_EQ(cost.flops, reference.flops);
  EXPECT_EQ(cost.compute_bound + cost.memory_bound + cost.overhead, 0);
}

// The RRT worked example: the scenario runs as shipped (profile path relative to the repo root,
// here made absolute), and continuous batching beats static batching.
double rrt_throughput(const std::vector<std::string>& extra,
                      const std::string& example = "rrt_gemma.yaml",
                      const std::string& costs = "rrt_gemma_a100_costs.csv") {
  const fs::path examples = fs::path(EXITSIM_SOURCE_DIR) / "scenarios/examples";
  std::vector<std::string> overrides = {"cost_model.profile=" + (examples / costs).string(),
                                        "workload.requests=300"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  const auto scenario = scenario::load_scenario_file((examples / example).string(), overrides);
  const auto workload = make_workload(scenario.workload, scenario.seed);
  const SimulationResult result = simulate(simulation_config_from(scenario, ""), *workload);
  EXPECT_EQ(result.totals.requests_finished, 300);
  EXPECT_EQ(result.totals.kv_blocks_leaked, 0);
  return result.summary.throughput_tokens_per_s;
}

TEST(CostTableExample, RrtGemmaRunsAndContinuousBeatsStatic) {
  const double static_batching = rrt_throughput({});
  const double continuous = rrt_throughput({"scheduler.kind=continuous"});
  EXPECT_GT(static_batching, 0.0);
  EXPECT_GT(continuous, static_batching * 1.1);
}

TEST(CostTableExample, RrtGemmaDepthwiseBatchingTurnsExitsIntoThroughput) {
  const auto recursive = [](const std::vector<std::string>& extra) {
    return rrt_throughput(extra, "rrt_gemma_recursive.yaml", "rrt_gemma_1b_a100_costs.csv");
  };
  const double depthwise = recursive({});
  const double sequence_wise = recursive({"sync.strategy=skip_kv"});
  const double no_exits = recursive({"exit_policy.kind=none", "sync.strategy=full_depth"});
  // Flat layer costs: sequence-wise, exits save almost nothing (some token of the batch runs
  // loop 2 in nearly every iteration); depth-wise, each step is one block call.
  EXPECT_LT(sequence_wise, no_exits * 1.05);
  EXPECT_GT(depthwise, sequence_wise * 1.3);
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {

// A table measured up to 101 tokens prices a 200-token batch at the 101-token time: a flat
// extrapolation the run's warnings must name.
TEST(TableCostModel, NamesPricesAboveTheTablesLargestBatch) {
  const TableCostModel m(parse(k_head + k_base_rows), *find_model_preset("gemma-2b"));
  const std::vector<BatchEntry> within(50, BatchEntry{1, 100, 18, true});
  m.iteration_cost(within);
  // The embedding has one row (batch 1): 50 tokens are already beyond it. Each iteration prices
  // the layer twice (the stack, then the coda).
  EXPECT_EQ(m.notes(), std::vector<std::string>{
                           "cost_model.table: embedding: 1 of 1 prices at a batch above the "
                           "table's largest (1; up to 50): priced at the largest row's time, not "
                           "measured"});
  const std::vector<BatchEntry> beyond(200, BatchEntry{1, 100, 18, true});
  m.iteration_cost(beyond);
  const std::vector<std::string> notes = m.notes();
  ASSERT_EQ(notes.size(), 3U);
  EXPECT_EQ(notes[0],
            "cost_model.table: layer: 2 of 4 prices at a batch above the table's largest (101; up "
            "to 200): priced at the largest row's time, not measured");
  EXPECT_NE(notes[1].find("cost_model.table: lm_head: 1 of 2 prices"), std::string::npos);
}

}  // namespace
}  // namespace exitsim::sim
