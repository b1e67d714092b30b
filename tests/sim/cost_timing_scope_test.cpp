// cost_model.timing_scope (docs/cost_model.md, "Timing scope"): block_only prices the recursion
// block's layers alone, as Mixture-of-Recursions timed its throughput. The figures are worked
// out by hand from the table's rows and the roofline's weight reads; a scope that is ignored
// gives the whole step's price, which these tests tell apart by far more than their tolerance.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/cost/make_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

using test_support::bare_h100;

ModelShape preset(const char* name) {
  return *find_model_preset(name);
}

// layer: 100 us at 1 token, +2 us per token; head: 50 us at 1, +1 us per token; embedding 5 us.
CostTable table() {
  std::istringstream in(
      "# exitsim-cost-table v1\nop,batch,time_us\nlayer,1,100\nlayer,101,300\nlm_head,1,50\n"
      "lm_head,101,150\nembedding,1,5\n");
  return CostTable::parse(in, "t.csv");
}

TimeNs us(double micros) {
  return static_cast<TimeNs>(micros * 1000.0);
}

BatchEntry decode(int depth) {
  return BatchEntry{1, 512, depth, true};
}

TEST(CostTimingScope, NamesParseAndOthersAreRefusedByKey) {
  EXPECT_EQ(timing_scope_from("whole_step"), TimingScope::whole_step);
  EXPECT_EQ(timing_scope_from("block_only"), TimingScope::block_only);
  try {
    timing_scope_from("block");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "cost_model.timing_scope: expected whole_step or block_only, found "
                 "'block'");
  }
  EXPECT_TRUE(timing_scope_note(TimingScope::whole_step, "roofline").empty());
}

TEST(CostTimingScope, TableBlockOnlyPricesTheBlockLayersAlone) {
  // MoR-3 on SmolLM-360M: one prelude layer, a block of 10 layers run 3 times (stack 31), one
  // coda layer. One token runs all 3 recursions (depth 31), one exits after the first (11).
  const ModelShape mor3 = preset("mor-smollm-360m-r3");
  ASSERT_EQ(mor3.depth.prelude_layers, 1);
  ASSERT_EQ(mor3.depth.stacked_depth(), 31);
  ASSERT_EQ(mor3.depth.coda_layers, 1);
  const std::vector<BatchEntry> batch = {decode(31), decode(11)};
  const TableCostModel whole(table(), mor3);
  const TableCostModel block(table(), mor3, {}, TimingScope::block_only);
  // Whole step: layers 1-11 see 2 tokens (102 us), 12-31 one (100 us), the coda both (102), the
  // head 2 emitting tokens (51) and the embedding (5).
  EXPECT_EQ(whole.iteration_cost(batch).total, us(11 * 102 + 20 * 100 + 102 + 51 + 5));
  // Block only: layers 2-11 at 2 tokens, 12-31 at one; no prelude, coda, head or embedding.
  EXPECT_EQ(block.iteration_cost(batch).total, us(10 * 102 + 20 * 100));
  // Its FLOPs are the block's: fewer than the whole step's, which adds 2 layers and the head.
  EXPECT_LT(block.iteration_cost(batch).flops, whole.iteration_cost(batch).flops);
  ASSERT_EQ(block.notes().size(), 1u);
  EXPECT_NE(block.notes().front().find("block times, not step times"), std::string::npos);
  for (const std::string& note : whole.notes())
    EXPECT_EQ(note.find("timing_scope"), std::string::npos) << note;
}

TEST(CostTimingScope, TableBlockOnlyOfAPlainModelIsEveryLayer) {
  // Gemma 2B has no recursion: its block is its 18 layers, without head and embedding.
  const TableCostModel block(table(), preset("gemma-2b"), {}, TimingScope::block_only);
  const std::vector<BatchEntry> batch(4, decode(18));
  EXPECT_EQ(block.iteration_cost(batch).total, us(18 * 106));
}

TEST(CostTimingScope, RooflineBlockOnlyIsTheBlockWeightReadsPlusItsLaunches) {
  // One decode token of MoR-3 at a short context on a bare H100: decode is memory-bound, so each
  // layer call costs its weights read at 85% of 3.35 TB/s plus 8 launches (no prefill
  // attention). Block only: 30 layer calls (10 layers x 3 recursions); the whole step adds the
  // prelude and coda layers and the LM head (49,152 x 960 weights), about 20% more.
  const ModelShape mor3 = preset("mor-smollm-360m-r3");
  ASSERT_TRUE(mor3.depth.lora_rank.empty());
  const std::vector<BatchEntry> batch = {BatchEntry{1, 16, 31, true}};
  const RooflineCostModel block(mor3, bare_h100(), {0.7, 0.85}, {}, false, TimingScope::block_only);
  const RooflineCostModel whole(mor3, bare_h100(), {0.7, 0.85});
  const double layer_bytes = static_cast<double>(mor3.layer_parameters() * 2);
  const double launch_ns = static_cast<double>(bare_h100().launch_overhead);
  const double expected = 30 * (layer_bytes / (3.35e12 * 0.85) * 1e9 + 8 * launch_ns);
  const double got = static_cast<double>(block.iteration_cost(batch).total);
  EXPECT_NEAR(got, expected, 0.02 * expected);
  const double head_ns =
      static_cast<double>(mor3.vocab * mor3.d_model * 2) / (3.35e12 * 0.85) * 1e9;
  EXPECT_GT(static_cast<double>(whole.iteration_cost(batch).total) - got, head_ns);
  // The op-by-op view `exitsim cost` prints is the same scope: its ops sum to the total.
  const std::vector<OpCost> ops = block.op_breakdown(batch);
  EXPECT_EQ(ops.size(), 30u * 10);  // 10 ops per layer row (prefill attention, K/V-only: idle)
  double sum = 0;
  for (const OpCost& op : ops)
    sum += op.duration_ns;
  EXPECT_NEAR(got, sum, 1.0);
}

TEST(CostTimingScope, RooflineBlockOnlyPricesNoExitProbes) {
  // A confidence policy's probes are LM head calls at the exit points: not in the block.
  const ModelShape mor3 = preset("mor-smollm-360m-r3");
  const std::vector<BatchEntry> batch = {BatchEntry{1, 16, 31, true}};
  const RooflineCostModel probed(mor3, bare_h100(), {0.7, 0.85}, {}, true, TimingScope::block_only);
  const RooflineCostModel plain(mor3, bare_h100(), {0.7, 0.85}, {}, false, TimingScope::block_only);
  EXPECT_EQ(probed.iteration_cost(batch).total, plain.iteration_cost(batch).total);
}

std::string make_error(const scenario::CostModelConfig& config, ParallelSpec parallel) {
  try {
    make_cost_model(config, preset("mor-smollm-360m-r3"), bare_h100(), parallel);
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CostTimingScope, CalibratedAndPipelineStagesAreRefusedInOneLine) {
  scenario::CostModelConfig calibrated;
  calibrated.kind = "calibrated";
  calibrated.profile = "p.json";
  calibrated.timing_scope = "block_only";
  EXPECT_EQ(make_error(calibrated, {}),
            "cost_model.timing_scope: expected whole_step for a calibrated profile (its fits "
            "price whole engine steps), found block_only");
  scenario::CostModelConfig roofline;
  roofline.timing_scope = "block_only";
  roofline.flops_efficiency = 0.7;
  roofline.bandwidth_efficiency = 0.85;
  ParallelSpec staged;
  staged.pipeline = 2;
  EXPECT_EQ(make_error(roofline, staged),
            "cost_model.timing_scope: expected whole_step under pipeline parallelism, found "
            "block_only with parallel.pipeline 2");
}

}  // namespace
}  // namespace exitsim::sim
