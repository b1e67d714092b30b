// The work of the synchronization strategies as the roofline model prices it: mid-stack starts
// and pending fill (deferred_fill), K/V-only layers (state_copy), masked layers (batch_sync),
// per-recursion contexts (skip_kv) and reused K/V (shared_kv).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

const ModelShape& llama() {
  return test_support::llama_3_8b();
}
using test_support::h100;
RooflineCostModel llama_on_h100() {
  return RooflineCostModel(llama(), h100(), {0.7, 0.85});
}
// Llama-3-8B cut to one prelude layer, a 10-layer block run three times and one coda layer.
ModelShape recursive_llama() {
  ModelShape m = llama();
  m.depth = DepthStructure::middle_cycle(32, 3);
  return m;
}

BatchEntry decode(std::int64_t context, int depth) {
  return {1, context, depth, true};
}
std::vector<BatchEntry> decodes(int size, std::int64_t context, int depth) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), decode(context, depth));
}

OpCost op_at(const std::vector<OpCost>& ops, OpKind kind, int layer) {
  for (const OpCost& op : ops) {
    if (op.kind == kind && op.layer == layer)
      return op;
  }
  ADD_FAILURE() << "no op " << to_string(kind) << " at layer " << layer;
  return {};
}

double head_flops(const std::vector<OpCost>& ops) {
  double flops = 0;
  for (const OpCost& op : ops) {
    if (op.layer < 0)
      flops += op.flops;
  }
  return flops;
}

const double k_kv_width = 8.0 * 128;  // n_kv_heads x head_dim of Llama-3-8B
const double k_d_model = 4096;

TEST(CostSyncWork, StartDepthRunsOnlyTheUpperLayers) {
  const RooflineCostModel m = llama_on_h100();
  BatchEntry full{256, 512, 32, false};
  BatchEntry bottom = full;
  bottom.depth = 16;
  BatchEntry top = full;
  top.start_depth = 16;
  const IterationCost full_cost = m.iteration_cost({&full, 1});
  const IterationCost top_cost = m.iteration_cost({&top, 1});
  const IterationCost bottom_cost = m.iteration_cost({&bottom, 1});
  // The layers split exactly; the final norm runs with the bottom half (an entry starting
  // mid-stack continues tokens that went through it already).
  EXPECT_NEAR(top_cost.flops + bottom_cost.flops, full_cost.flops, 1e-9 * full_cost.flops);
  EXPECT_NEAR(static_cast<double>(top_cost.total + bottom_cost.total),
              static_cast<double>(full_cost.total), 2.0);
  const std::vector<OpCost> ops = m.op_breakdown({&top, 1});
  EXPECT_FALSE(op_at(ops, OpKind::qkv_projection, 15).launched);
  EXPECT_TRUE(op_at(ops, OpKind::qkv_projection, 16).launched);
  EXPECT_FALSE(op_at(ops, OpKind::final_norm, -1).launched);
  EXPECT_DOUBLE_EQ(head_flops(ops), 0);
  // Linear ops scale with the layers run: the top half is half the stack.
  const double stack_flops = full_cost.flops - head_flops(m.op_breakdown({&full, 1}));
  EXPECT_NEAR(top_cost.flops, stack_flops / 2, 1e-9 * stack_flops);
}

TEST(CostSyncWork, TheCodaFieldDecidesWhoRunsTheCodaAndTheFinalNorm) {
  const RooflineCostModel m(recursive_llama(), h100(), {0.7, 0.85});
  // Depth-wise steps: one token enters (prelude + recursion 1, no coda), one leaves the block
  // after recursion 2 (folded onto recursion 1's layers) with its coda and head.
  BatchEntry entering = decode(500, 11);
  entering.emits_token = false;
  entering.coda = BatchEntry::Coda::skip;
  BatchEntry leaving = decode(500, 11);
  leaving.start_depth = 1;
  leaving.coda = BatchEntry::Coda::run;
  const std::vector<OpCost> ops = m.op_breakdown(std::vector<BatchEntry>{entering, leaving});
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::qkv_projection, 0).flops,
                   op_at(ops, OpKind::qkv_projection, 10).flops / 2);
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::qkv_projection, 31).flops,
                   op_at(ops, OpKind::qkv_projection, 0).flops);  // the coda: one token
  EXPECT_FALSE(op_at(ops, OpKind::qkv_projection, 11).launched);
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::final_norm, -1).flops, 4 * k_d_model);
  // A coda-only entry (a token that waited for the head) prices the coda and the head only.
  BatchEntry waited = decode(500, 31);
  waited.start_depth = 31;
  waited.coda = BatchEntry::Coda::run;
  const IterationCost alone = m.iteration_cost({&waited, 1});
  const IterationCost with_leaving =
      m.iteration_cost(std::vector<BatchEntry>{entering, leaving, waited});
  const IterationCost without = m.iteration_cost(std::vector<BatchEntry>{entering, leaving});
  EXPECT_GT(alone.total, 0);
  EXPECT_GT(with_leaving.flops, without.flops);
  EXPECT_LT(with_leaving.total - without.total, alone.total);  // weights read once
}

TEST(CostSyncWork, PendingFillAttendsAsOneCallOverTheWholeContext) {
  const RooflineCostModel m = llama_on_h100();
  const std::int64_t c = 2000;
  const std::int64_t pending = 4;
  BatchEntry fill = decode(c, 32);
  fill.pending_tokens = pending;
  fill.pending_from_depth = 8;
  const std::vector<OpCost> ops = m.op_breakdown({&fill, 1});
  // Below the shallow exit the token decodes alone.
  EXPECT_TRUE(op_at(ops, OpKind::attention_decode, 7).launched);
  EXPECT_FALSE(op_at(ops, OpKind::attention_prefill, 7).launched);
  // Above it, m + 1 queries over the c - m tokens before the pending ones, K/V read once.
  const OpCost attention = op_at(ops, OpKind::attention_prefill, 20);
  EXPECT_FALSE(op_at(ops, OpKind::attention_decode, 20).launched);
  const double q = pending + 1;
  const double before = c - pending;
  EXPECT_DOUBLE_EQ(attention.flops, 4.0 * 32 * 128 * (q * before + q * (q + 1) / 2));
  const double kv = 2 * k_kv_width * 2;
  EXPECT_DOUBLE_EQ(attention.bytes, kv * (before + q) + q * (kv + 2 * 32 * 128 * 2));
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::mlp_down, 20).flops, 2 * q * 14336 * k_d_model);
  // Only the current token runs the head.
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::final_norm, -1).flops, 4 * k_d_model);

  // The same work as a current-token entry plus a mid-stack entry for the pending tokens: equal
  // FLOPs, but that form reads the sequence's K/V twice and launches two attention kernels.
  BatchEntry pending_entry{pending, c - pending, 32, false};
  pending_entry.start_depth = 8;
  const std::vector<BatchEntry> split = {decode(c, 32), pending_entry};
  const IterationCost one = m.iteration_cost({&fill, 1});
  const IterationCost two = m.iteration_cost(split);
  EXPECT_NEAR(one.flops, two.flops, 1e-9 * one.flops);
  EXPECT_LT(one.bytes, two.bytes);
  EXPECT_LT(one.total, two.total);
}

// On the bare roofline: FREE's argument is the roofline's own. (On the H100 preset the step with
// four pending tokens prices 1.2% below the step without them: the pending fill's attention is a
// prefill kernel, which takes the shortest kernel's 5 us where the decode kernel it replaces takes
// its 14 us floor and 0.03 us per sequence and K/V head.)
TEST(CostSyncWork, PendingFillIsNearlyFreeWhenMemoryBoundAndNotWhenComputeBound) {
  const RooflineCostModel m(llama(), test_support::bare_h100(), {0.7, 0.85});
  const auto with_pending = [&](std::int64_t pending) {
    std::vector<BatchEntry> batch = decodes(8, 3000, 32);
    for (BatchEntry& e : batch) {
      e.pending_tokens = pending;
      e.pending_from_depth = 8;
    }
    return static_cast<double>(m.iteration_cost(batch).total);
  };
  const double alone = with_pending(0);
  // FREE's argument: decode reads the weights whatever the query length, so a few pending
  // tokens per sequence ride along (the extra is mostly the prefill kernel's launches).
  EXPECT_GT(with_pending(4), alone);
  EXPECT_LT(with_pending(4), 1.05 * alone);
  // Hundreds of pending tokens per sequence make the deep layers compute-bound.
  EXPECT_GT(with_pending(512), 2 * alone);
}

TEST(CostSyncWork, KvOnlyLayersCostFarLessThanFullLayers) {
  const RooflineCostModel m = llama_on_h100();
  const std::vector<BatchEntry> full = decodes(16, 1000, 32);
  const std::vector<BatchEntry> exited = decodes(16, 1000, 8);
  std::vector<BatchEntry> copied = exited;
  for (BatchEntry& e : copied)
    e.kv_only_depth = 32;
  const double full_ns = static_cast<double>(m.iteration_cost(full).total);
  const double exited_ns = static_cast<double>(m.iteration_cost(exited).total);
  const double copied_ns = static_cast<double>(m.iteration_cost(copied).total);
  EXPECT_GT(copied_ns, exited_ns);
  // K/V weights are 1/13 of a layer's; launches add a little.
  EXPECT_LT(copied_ns - exited_ns, 0.15 * (full_ns - exited_ns));

  // With nobody else at the layer the K/V weights are read for the copied states alone.
  const std::vector<OpCost> alone = m.op_breakdown(copied);
  const OpCost kv_alone = op_at(alone, OpKind::kv_projection, 20);
  const double weights = 2 * k_d_model * k_kv_width * 2;
  const double per_token = (k_d_model + 2 * k_kv_width) * 2 + 2 * k_kv_width * 2;
  EXPECT_DOUBLE_EQ(kv_alone.flops, 16 * 2 * 2 * k_d_model * k_kv_width);
  EXPECT_DOUBLE_EQ(kv_alone.bytes, weights + 16 * per_token);
  EXPECT_FALSE(op_at(alone, OpKind::qkv_projection, 20).launched);
  EXPECT_FALSE(op_at(alone, OpKind::kv_projection, 7).launched);
  // Beside tokens running the layer, the weights are counted once, with the QKV projection.
  std::vector<BatchEntry> mixed = copied;
  mixed.push_back(decode(1000, 32));
  const OpCost kv_mixed = op_at(m.op_breakdown(mixed), OpKind::kv_projection, 20);
  EXPECT_DOUBLE_EQ(kv_mixed.bytes, 16 * per_token);
}

TEST(CostSyncWork, MaskedFlopsAreTheLayersAboveTheUsefulDepth) {
  const RooflineCostModel m = llama_on_h100();
  const std::vector<BatchEntry> riding = decodes(16, 1500, 32);
  std::vector<BatchEntry> masked = riding;
  for (BatchEntry& e : masked)
    e.useful_depth = 8;
  const IterationCost plain_cost = m.iteration_cost(riding);
  const IterationCost masked_cost = m.iteration_cost(masked);
  // Masked layers still run and are timed.
  EXPECT_EQ(masked_cost.total, plain_cost.total);
  EXPECT_DOUBLE_EQ(masked_cost.flops, plain_cost.flops);
  EXPECT_DOUBLE_EQ(plain_cost.masked_flops, 0);
  const double stack = plain_cost.flops - head_flops(m.op_breakdown(riding));
  EXPECT_NEAR(masked_cost.masked_flops, stack * 24 / 32, 1e-9 * stack);
  // Half the entries masked: half of that.
  for (std::size_t i = 0; i < masked.size(); i += 2)
    masked[i].useful_depth = 32;
  EXPECT_NEAR(m.iteration_cost(masked).masked_flops, stack * 12 / 32, 1e-9 * stack);
}

TEST(CostSyncWork, SkipKvShorterDeepContextsCostLessAttention) {
  const ModelShape shape = recursive_llama();
  const RooflineCostModel m(shape, h100(), {0.7, 0.85});
  const int full = shape.depth.stacked_depth();
  const std::vector<BatchEntry> plain = decodes(8, 3000, full);
  std::vector<BatchEntry> skipped = plain;
  for (BatchEntry& e : skipped) {
    e.recursion_context_count = 3;
    e.recursion_context = {3000, 800, 200};
  }
  EXPECT_LT(m.iteration_cost(skipped).total, m.iteration_cost(plain).total);
  const std::vector<OpCost> ops = m.op_breakdown(skipped);
  const double kv = 2 * k_kv_width * 2;
  const double per_query = kv + 2 * 32 * 128 * 2;
  // Layer 0 is the prelude, 1..10 recursion 1, 11..20 recursion 2, 21..30 recursion 3.
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 0).bytes, 8 * (kv * 3001 + per_query));
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 10).bytes, 8 * (kv * 3001 + per_query));
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 11).bytes, 8 * (kv * 801 + per_query));
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 30).bytes, 8 * (kv * 201 + per_query));
  // The coda attends over the whole context.
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 31).bytes, 8 * (kv * 3001 + per_query));
  // An override equal to the context changes nothing, to the bit.
  std::vector<BatchEntry> same = plain;
  for (BatchEntry& e : same) {
    e.recursion_context_count = 2;
    e.recursion_context = {3000, 3000};
  }
  EXPECT_EQ(m.iteration_cost(same).total, m.iteration_cost(plain).total);
  EXPECT_EQ(m.iteration_cost(same).bytes, m.iteration_cost(plain).bytes);
}

TEST(CostSyncWork, SharedKvSkipsKvProjectionsAtDeeperRecursions) {
  const ModelShape shape = recursive_llama();
  const RooflineCostModel m(shape, h100(), {0.7, 0.85});
  const std::vector<BatchEntry> plain = decodes(8, 2000, shape.depth.stacked_depth());
  std::vector<BatchEntry> shared = plain;
  for (BatchEntry& e : shared)
    e.reuse_first_recursion_kv = true;
  EXPECT_LT(m.iteration_cost(shared).total, m.iteration_cost(plain).total);
  const std::vector<OpCost> ops = m.op_breakdown(shared);
  const std::vector<OpCost> plain_ops = m.op_breakdown(plain);
  const double q_width = 32 * 128;
  // Recursion 1 computes K/V as usual.
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::qkv_projection, 5).flops,
                   op_at(plain_ops, OpKind::qkv_projection, 5).flops);
  // Deeper ones compute Q only, read only the Q weights and write no K/V.
  const OpCost qkv = op_at(ops, OpKind::qkv_projection, 15);
  EXPECT_DOUBLE_EQ(qkv.flops, 8 * 2 * k_d_model * q_width);
  EXPECT_DOUBLE_EQ(qkv.bytes, (k_d_model * q_width + 8 * (k_d_model + q_width)) * 2);
  const double kv = 2 * k_kv_width * 2;
  EXPECT_DOUBLE_EQ(op_at(plain_ops, OpKind::attention_decode, 25).bytes -
                       op_at(ops, OpKind::attention_decode, 25).bytes,
                   8 * kv);
  // Attention still reads the full context.
  EXPECT_DOUBLE_EQ(op_at(ops, OpKind::attention_decode, 25).flops,
                   op_at(plain_ops, OpKind::attention_decode, 25).flops);
  // Beside a token that computes its K/V, the K/V weights are read again.
  std::vector<BatchEntry> mixed = shared;
  mixed.push_back(decode(2000, shape.depth.stacked_depth()));
  const OpCost mixed_qkv = op_at(m.op_breakdown(mixed), OpKind::qkv_projection, 15);
  const double all_weights = k_d_model * (q_width + 2 * k_kv_width) * 2;
  EXPECT_DOUBLE_EQ(mixed_qkv.bytes, all_weights + 8 * (k_d_model + q_width) * 2 +
                                        (k_d_model + q_width + 2 * k_kv_width) * 2);
}

TEST(CostSyncWork, DefaultFieldsChangeNothing) {
  const RooflineCostModel m = llama_on_h100();
  std::vector<BatchEntry> batch = decodes(12, 900, 16);
  batch.push_back({300, 40, 32, true});
  std::vector<BatchEntry> spelled = batch;
  for (BatchEntry& e : spelled) {
    e.useful_depth = e.depth;   // masks nothing
    e.kv_only_depth = e.depth;  // no K/V-only layers
    e.pending_from_depth = 3;   // no pending tokens to join
  }
  const IterationCost a = m.iteration_cost(batch);
  const IterationCost b = m.iteration_cost(spelled);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.flops, b.flops);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(b.masked_flops, 0);
}

}  // namespace
}  // namespace exitsim::sim
