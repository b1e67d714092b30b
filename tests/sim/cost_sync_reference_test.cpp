// The fast iteration_cost against the per-layer op_breakdown reference on random batches that use
// every synchronization field, on plain and recursive (LoRA) models, through both the slot path
// and the sweep taken when a batch has more boundaries than the slots hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/calibrated_cost_model.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::sim {
namespace {

const HardwareSpec& h100() {
  static const HardwareSpec h = *find_hardware_preset("h100-sxm");
  return h;
}

// Random entries over a few exit points (or any depth when `spread`), each field set with some
// probability; the recursion fields only mean something on a recursive model.
std::vector<BatchEntry> random_batch(std::mt19937& rng, int stacked, int size, bool spread) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto chance = [&](int percent) { return pick(1, 100) <= percent; };
  const std::vector<int> exits = {stacked / 4, stacked / 2, stacked};
  const auto depth = [&] {
    return spread ? pick(0, stacked) : exits[static_cast<std::size_t>(pick(0, 2))];
  };
  std::vector<BatchEntry> batch;
  for (int i = 0; i < size; ++i) {
    BatchEntry e;
    e.query_tokens = chance(80) ? 1 : pick(0, 300);
    e.context_tokens = pick(0, 4000);
    e.depth = depth();
    e.emits_token = chance(70);
    if (chance(15))
      e.start_depth = pick(0, e.depth);
    if (chance(15)) {
      e.pending_tokens = pick(1, 8);
      e.pending_from_depth = depth();
    }
    if (chance(20))
      e.kv_only_depth = chance(50) ? stacked : depth();
    if (chance(25))
      e.useful_depth = pick(0, e.depth);
    if (chance(15))
      e.reuse_first_recursion_kv = true;
    if (chance(15))
      e.coda = chance(50) ? BatchEntry::Coda::run : BatchEntry::Coda::skip;
    if (chance(15)) {
      e.recursion_context_count = static_cast<std::uint8_t>(pick(1, 8));
      for (std::int32_t& c : e.recursion_context)
        c = pick(0, static_cast<int>(e.context_tokens));
    }
    batch.push_back(e);
  }
  return batch;
}

void expect_matches_reference(const RooflineCostModel& m, const std::vector<BatchEntry>& batch) {
  const IterationCost c = m.iteration_cost(batch);
  double total = 0;
  double flops = 0;
  double bytes = 0;
  double masked = 0;
  for (const OpCost& op : m.op_breakdown(batch)) {
    total += op.duration_ns;
    flops += op.flops;
    bytes += op.bytes;
    masked += op.masked_flops;
  }
  EXPECT_NEAR(static_cast<double>(c.total), total, 1.0 + 1e-12 * total);
  EXPECT_NEAR(c.flops, flops, 1e-9 * flops);
  EXPECT_NEAR(c.bytes, bytes, 1e-9 * bytes);
  EXPECT_NEAR(c.masked_flops, masked, 1e-9 * flops);
  EXPECT_LE(c.masked_flops, c.flops * (1 + 1e-12));
  // Order does not matter.
  std::vector<BatchEntry> reversed(batch.rbegin(), batch.rend());
  const IterationCost r = m.iteration_cost(reversed);
  EXPECT_EQ(r.total, c.total);
  EXPECT_NEAR(r.masked_flops, c.masked_flops, 1e-9 * flops);
}

TEST(CostSyncReference, RandomBatchesOnAPlainModel) {
  const RooflineCostModel m(*find_model_preset("llama-3-8b"), h100(), {0.7, 0.85});
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    expect_matches_reference(m, random_batch(rng, 32, 1 + trial % 24, false));
  }
}

TEST(CostSyncReference, RandomBatchesOnARecursiveModelWithLora) {
  ModelShape shape = *find_model_preset("smollm-360m");
  shape.depth = DepthStructure::middle_cycle(32, 3);
  shape.depth.lora_rank = {0, 16, 64};
  const RooflineCostModel m(shape, h100(), {0.7, 0.85});
  std::mt19937 rng(23);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    expect_matches_reference(m,
                             random_batch(rng, shape.depth.stacked_depth(), 1 + trial % 24, false));
  }
}

TEST(CostSyncReference, ManyBoundariesTakeTheExactSweep) {
  ModelShape shape = *find_model_preset("smollm-135m");
  shape.depth = DepthStructure::middle_cycle(62, 6);
  const RooflineCostModel m(shape, h100(), {0.7, 0.85});
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    SCOPED_TRACE(trial);
    expect_matches_reference(m, random_batch(rng, shape.depth.stacked_depth(), 80, true));
  }
}

// A shortcut of the fast path against the general path on the same work: the same doubles.
void expect_same_doubles(const IterationCost& a, const IterationCost& b) {
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.compute_bound, b.compute_bound);
  EXPECT_EQ(a.memory_bound, b.memory_bound);
  EXPECT_EQ(a.overhead, b.overhead);
  EXPECT_EQ(a.flops, b.flops);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.masked_flops, b.masked_flops);
}

// Depth-wise steps: entries over the prelude and recursion 1 (recursion r folded onto it, with
// its own context), tokens that waited running only the coda, and a prompt in between.
TEST(CostSyncReference, DepthwiseStepsMatchTheReference) {
  ModelShape shape = *find_model_preset("smollm-360m");
  shape.depth = DepthStructure::middle_cycle(32, 3);  // prelude 1, block 10, coda 1
  const RooflineCostModel m(shape, h100(), {0.7, 0.85});
  std::mt19937 rng(17);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 100; ++trial) {
    SCOPED_TRACE(trial);
    std::vector<BatchEntry> batch;
    const int size = pick(1, 40);
    for (int i = 0; i < size; ++i) {
      BatchEntry e{1, pick(0, 3000), 11, pick(0, 3) == 0};
      e.coda = e.emits_token ? BatchEntry::Coda::run : BatchEntry::Coda::skip;
      const int kind = pick(0, 9);
      if (kind == 0) {  // waited for the head
        e.start_depth = 31;
        e.depth = 31;
        e.coda = BatchEntry::Coda::run;
      } else if (kind == 1) {  // a prompt chunk through the whole stack
        e = BatchEntry{pick(2, 300), pick(0, 500), 31, true};
        e.recursion_context_count = 3;
        for (int r = 0; r < 3; ++r)
          e.recursion_context[static_cast<std::size_t>(r)] = pick(0, 500);
      } else {
        e.start_depth = pick(0, 1);
        e.recursion_context_count = 1;
        e.recursion_context[0] = pick(0, static_cast<int>(e.context_tokens));
      }
      batch.push_back(e);
    }
    expect_matches_reference(m, batch);
  }
}

// skip_kv's entries (each recursion's layers with that recursion's context, nothing else) take a
// shortcut in the fast path. Asking for the coda explicitly changes no work for an entry that
// starts at layer 1 but sends it down the general path: both must give the same doubles, on a
// block with a prelude and on one without.
TEST(CostSyncReference, RecursionContextShortcutMatchesTheGeneralPathExactly) {
  ModelShape with_prelude = *find_model_preset("smollm-360m");
  with_prelude.depth = DepthStructure::middle_cycle(32, 3);  // prelude 1, block 10 x 3, coda 1
  ModelShape without_prelude = with_prelude;
  without_prelude.depth.prelude_layers = 0;
  without_prelude.depth.coda_layers = 2;
  for (const ModelShape& shape : {with_prelude, without_prelude}) {
    const RooflineCostModel m(shape, h100(), {0.7, 0.85});
    const int stacked = shape.depth.stacked_depth();
    std::mt19937 rng(9);
    const auto pick = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };
    for (int trial = 0; trial < 200; ++trial) {
      SCOPED_TRACE(trial);
      std::vector<BatchEntry> shortcut;
      const int size = pick(1, 40);
      for (int i = 0; i < size; ++i) {
        BatchEntry e{pick(0, 9) == 0 ? pick(2, 50) : 1, pick(0, 3000), pick(1, stacked + 2),
                     pick(0, 3) != 0};
        e.recursion_context_count = static_cast<std::uint8_t>(pick(0, 3));
        for (std::int32_t& c : e.recursion_context)
          c = pick(0, 3) == 0 ? static_cast<std::int32_t>(e.context_tokens) : pick(0, 3000);
        shortcut.push_back(e);
      }
      std::vector<BatchEntry> general = shortcut;
      for (BatchEntry& e : general)
        e.coda = BatchEntry::Coda::run;
      expect_same_doubles(m.iteration_cost(shortcut), m.iteration_cost(general));
      expect_matches_reference(m, shortcut);
    }
  }
}

// deferred_fill's usual entries (pending tokens joining from a layer, nothing else) take a
// shortcut in the fast path. A per-recursion context equal to the entry's own context changes no
// work on a model without recursions but sends the entry down the general path: both must give
// the same doubles.
TEST(CostSyncReference, PendingFillShortcutMatchesTheGeneralPathExactly) {
  const RooflineCostModel m(*find_model_preset("llama-3-8b"), h100(), {0.7, 0.85});
  std::mt19937 rng(5);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<BatchEntry> shortcut;
    const int size = pick(1, 40);
    for (int i = 0; i < size; ++i) {
      BatchEntry e;
      e.query_tokens = pick(0, 9) == 0 ? pick(2, 50) : 1;
      e.context_tokens = pick(0, 3000);
      e.depth = std::vector<int>{8, 16, 24, 32}[static_cast<std::size_t>(pick(0, 3))];
      e.emits_token = pick(0, 3) != 0;
      if (pick(0, 2) != 0) {
        e.pending_tokens = pick(1, 6);
        e.pending_from_depth = pick(-2, 34);
      }
      shortcut.push_back(e);
    }
    std::vector<BatchEntry> general = shortcut;
    for (BatchEntry& e : general) {
      if (e.pending_tokens > 0) {
        e.recursion_context_count = 1;
        e.recursion_context[0] = static_cast<std::int32_t>(e.context_tokens);
      }
    }
    expect_same_doubles(m.iteration_cost(shortcut), m.iteration_cost(general));
  }
}

// state_copy's exited tokens (K/V-only from their depth to the top, nothing else) are counted
// with their depth in the fast path. A per-recursion context equal to the entry's own context
// sends the entry down the general path instead: both must give the same doubles, in batches
// where some token runs to the top and in batches where none does (the K/V-only layers then end
// the stack on their own).
TEST(CostSyncReference, KvOnlyToTheTopShortcutMatchesTheGeneralPathExactly) {
  const RooflineCostModel m(*find_model_preset("llama-3-8b"), h100(), {0.7, 0.85});
  std::mt19937 rng(41);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int none_to_the_top = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    std::vector<BatchEntry> shortcut;
    const int size = pick(1, 40);
    const int deepest = trial % 3 == 0 ? 2 : 3;  // every third batch stops below the top
    bool reaches_top = false;
    for (int i = 0; i < size; ++i) {
      BatchEntry e;
      e.query_tokens = pick(0, 9) == 0 ? pick(2, 50) : 1;
      e.context_tokens = pick(0, 3000);
      e.depth = std::vector<int>{8, 16, 24, 32}[static_cast<std::size_t>(pick(0, deepest))];
      e.emits_token = pick(0, 3) != 0;
      e.kv_only_depth = e.depth < 32 ? 32 : 0;
      reaches_top |= e.depth == 32;
      shortcut.push_back(e);
    }
    none_to_the_top += reaches_top ? 0 : 1;
    std::vector<BatchEntry> general = shortcut;
    for (BatchEntry& e : general) {
      if (e.kv_only_depth > e.depth) {
        e.recursion_context_count = 1;
        e.recursion_context[0] = static_cast<std::int32_t>(e.context_tokens);
      }
    }
    expect_same_doubles(m.iteration_cost(shortcut), m.iteration_cost(general));
    expect_matches_reference(m, shortcut);
  }
  EXPECT_GE(none_to_the_top, 90);
}

// The head of a decode batch (every token emits) is looked up, for up to 63 tokens, in prices the
// model tabled at construction; past that it is priced op by op. Either way it is the sum of its
// ops' prices in graph order: the same doubles as the per-op reference, for every batch size on
// both sides of the table's end (a batch whose entries run no layer prices only the head).
TEST(CostSyncReference, DecodeHeadsAreTheSumOfTheirOpsExactly) {
  for (const char* preset : {"llama-3-8b", "smollm-135m"}) {
    SCOPED_TRACE(preset);
    const RooflineCostModel m(*find_model_preset(preset), h100(), {0.7, 0.85});
    std::mt19937 rng(3);
    for (int tokens = 1; tokens <= 80; ++tokens) {
      SCOPED_TRACE(tokens);
      std::vector<BatchEntry> batch;
      for (int i = 0; i < tokens; ++i)
        batch.push_back({1, std::uniform_int_distribution<int>(0, 4000)(rng), 0, true});
      const IterationCost c = m.iteration_cost(batch);
      double total = 0;
      double flops = 0;
      double bytes = 0;
      for (const OpCost& op : m.op_breakdown(batch)) {
        total += op.duration_ns;
        flops += op.flops;
        bytes += op.bytes;
      }
      EXPECT_GT(flops, 0);
      EXPECT_EQ(c.total, std::llround(total));
      EXPECT_EQ(c.flops, flops);
      EXPECT_EQ(c.bytes, bytes);
    }
  }
}

}  // namespace
}  // namespace exitsim::sim

namespace exitsim::sim {
namespace {

// RooflineCostModel::counting skips the times: its FLOPs, bytes and masked FLOPs must be exactly
// a full model's (the calibrated and table models report them), and its times 0. Random batches
// over every synchronization field, through the slot path and the sweep, plain and recursive.
TEST(CostSyncReference, CountingModelCountsExactlyWhatTheFullModelCounts) {
  ModelShape recursive = *find_model_preset("smollm-360m");
  recursive.depth = DepthStructure::middle_cycle(32, 3);
  recursive.depth.lora_rank = {0, 16, 64};
  for (const ModelShape& shape : {*find_model_preset("llama-3-8b"), recursive}) {
    const RooflineCostModel full(shape, counting_hardware(shape), {1.0, 1.0});
    const RooflineCostModel counting = RooflineCostModel::counting(shape);
    EXPECT_TRUE(counting.counts_regroup_exactly());  // the launch classes' sums are tested here
    std::mt19937 rng(31);
    for (int trial = 0; trial < 60; ++trial) {
      SCOPED_TRACE(trial);
      const std::vector<BatchEntry> batch =
          random_batch(rng, shape.depth.stacked_depth(),
                       1 + trial % 24 + (trial % 10 == 0 ? 80 : 0), trial % 10 == 0);
      const IterationCost expected = full.iteration_cost(batch);
      const IterationCost counted = counting.iteration_cost(batch);
      EXPECT_GT(expected.flops, 0);
      EXPECT_EQ(counted.flops, expected.flops);
      EXPECT_EQ(counted.bytes, expected.bytes);
      EXPECT_EQ(counted.masked_flops, expected.masked_flops);
      EXPECT_EQ(counted.total, 0);
    }
  }
}

// The counting model sums a graph's FLOPs per launch condition rather than op by op, which can
// only give the op-by-op doubles where every FLOP term is an integer (any order of integer sums
// below 2^53 is exact). A mixture of experts scales its FLOPs by a load factor, so it is counted
// op by op; a batch past 2^53 FLOPs is counted again op by op.
TEST(CostSyncReference, CountingByLaunchClassIsExactOrNotUsed) {
  const ModelShape dense = *find_model_preset("llama-3.1-405b");
  const ModelShape mixture = *find_model_preset("mixtral-8x7b");
  EXPECT_TRUE(RooflineCostModel::counting(dense).counts_regroup_exactly());
  EXPECT_FALSE(RooflineCostModel::counting(mixture).counts_regroup_exactly());
  for (const ModelShape& shape : {dense, mixture}) {
    SCOPED_TRACE(shape.name);
    const RooflineCostModel full(shape, counting_hardware(shape), {1.0, 1.0});
    const RooflineCostModel counting = RooflineCostModel::counting(shape);
    std::mt19937 rng(5);
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<BatchEntry> batch =
          random_batch(rng, shape.depth.stacked_depth(), 1 + trial % 24, false);
      EXPECT_EQ(counting.iteration_cost(batch).flops, full.iteration_cost(batch).flops);
    }
    // 64 prompt chunks of 2,048 tokens: 2.1e16 FLOPs on the 405B model, past 2^53.
    const std::vector<BatchEntry> huge(64,
                                       BatchEntry{2048, 1000, shape.depth.stacked_depth(), true});
    const IterationCost expected = full.iteration_cost(huge);
    if (shape.name == dense.name) {
      EXPECT_GT(expected.flops, 0x1p53);
    }
    EXPECT_EQ(counting.iteration_cost(huge).flops, expected.flops);
    EXPECT_EQ(counting.iteration_cost(huge).bytes, expected.bytes);
  }
}

// The calibrated model counts FLOPs and bytes from its own walk over the layers (both passes'
// batches of each run of layers, through RooflineCostModel::count_stack_layers) rather than
// handing the batch to its counting model: the same FLOPs, bytes and masked FLOPs, exactly,
// on random batches over every synchronization field (a batch with masked layers is counted by
// the counting model itself).
TEST(CostSyncReference, CalibratedModelCountsWhatItsCountingModelCounts) {
  namespace ops = traces::engine_ops;
  ModelShape recursive = *find_model_preset("smollm-360m");
  recursive.depth = DepthStructure::middle_cycle(32, 3);
  recursive.depth.lora_rank = {0, 16, 64};
  for (const ModelShape& shape : {*find_model_preset("llama-3-8b"), recursive}) {
    CostProfile profile;
    profile.source.model = shape.name;
    profile.source.model_shape = model_fingerprint(shape);
    std::vector<std::string> names(ops::layer.begin(), ops::layer.end());
    for (const std::string_view name : {ops::embed, ops::lm_head, ops::sampling, ops::kv_only})
      names.emplace_back(name);
    for (const std::string& name : names) {
      OpFit fit;
      fit.name = name;
      fit.regimes = {{1 << 20, {1, 0.1, name == ops::attention ? 0.01 : 0, 0}}};
      fit.batch_min_seen = 1;
      fit.batch_max_seen = 1 << 20;
      profile.ops.push_back(fit);
    }
    std::sort(profile.ops.begin(), profile.ops.end(),
              [](const OpFit& a, const OpFit& b) { return a.name < b.name; });
    const CalibratedCostModel calibrated(profile, "p.json", shape);
    const RooflineCostModel counting = RooflineCostModel::counting(shape);
    std::mt19937 rng(17);
    int unmasked = 0;
    for (int trial = 0; trial < 80; ++trial) {
      SCOPED_TRACE(trial);
      const std::vector<BatchEntry> batch =
          random_batch(rng, shape.depth.stacked_depth(), 1 + trial % 6, trial % 10 == 0);
      unmasked += std::none_of(batch.begin(), batch.end(),
                               [](const BatchEntry& e) {
                                 return e.query_tokens > 0 && e.useful_depth < e.depth;
                               })
                      ? 1
                      : 0;
      const IterationCost expected = counting.iteration_cost(batch);
      const IterationCost counted = calibrated.iteration_cost(batch);
      EXPECT_EQ(counted.flops, expected.flops);
      EXPECT_EQ(counted.bytes, expected.bytes);
      EXPECT_EQ(counted.masked_flops, expected.masked_flops);
    }
    EXPECT_GT(unmasked, 20);  // most batches take the calibrated model's own count
  }
}

}  // namespace
}  // namespace exitsim::sim
