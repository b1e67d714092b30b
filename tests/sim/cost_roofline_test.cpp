#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

const ModelShape& llama() {
  return test_support::llama_3_8b();
}
using test_support::bare_h100;
using test_support::h100;

RooflineCostModel llama_on_h100() {
  return RooflineCostModel(llama(), h100(), {0.7, 0.85});
}

// The tests of the roofline's own arithmetic price on the preset without its kernel corrections.
RooflineCostModel llama_on_bare_h100() {
  return RooflineCostModel(llama(), bare_h100(), {0.7, 0.85});
}

std::vector<BatchEntry> decode_batch(int size, std::int64_t context, int depth = 32) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), {1, context, depth, true});
}

double launches_ns(int launches) {
  return launches * static_cast<double>(h100().launch_overhead);
}

double breakdown_sum(const std::vector<OpCost>& ops) {
  double sum = 0;
  for (const OpCost& op : ops)
    sum += op.duration_ns;
  return sum;
}

double duration_of(const std::vector<OpCost>& ops, OpKind kind, int layer) {
  for (const OpCost& op : ops) {
    if (op.kind == kind && op.layer == layer)
      return op.duration_ns;
  }
  ADD_FAILURE() << "no op " << to_string(kind) << " at layer " << layer;
  return 0;
}

TEST(CostRoofline, DecodeBatchOneIsWeightReadsPlusLaunches) {
  const IterationCost c = llama_on_bare_h100().iteration_cost(decode_batch(1, 16));
  // Every weight is read once except the embedding table, which is gathered row by row. Ops
  // launched: 8 per layer (no prefill attention) and norm, LM head and sampling.
  const double embedding_bytes = static_cast<double>(llama().vocab * llama().d_model * 2);
  const double weights_ns =
      (static_cast<double>(llama().weight_bytes()) - embedding_bytes) / (3.35e12 * 0.85) * 1e9;
  const double expected = weights_ns + launches_ns(32 * 8 + 3);
  EXPECT_NEAR(static_cast<double>(c.total), expected, 0.02 * expected);
  EXPECT_GT(c.memory_bound, 20 * c.compute_bound);
  EXPECT_EQ(c.overhead, 259 * h100().launch_overhead);
  EXPECT_EQ(c.total, c.compute_bound + c.memory_bound + c.overhead);
}

TEST(CostRoofline, LargePrefillIsComputeBound) {
  const std::int64_t t = 4096;
  const IterationCost c =
      llama_on_bare_h100().iteration_cost(std::vector<BatchEntry>{{t, 0, 32, true}});
  const double expected =
      2 * static_cast<double>(llama().parameter_count()) * t / (989.4e12 * 0.7) * 1e9;
  EXPECT_NEAR(static_cast<double>(c.total), expected, 0.1 * expected);
  EXPECT_GT(c.compute_bound, 4 * c.memory_bound);
  // FLOPs: the linear layers dominate, causal attention adds its T^2/2 pairs.
  const double linear = 2.0 * static_cast<double>(32 * llama().layer_parameters()) * t;
  EXPECT_GT(c.flops, linear);
  EXPECT_LT(c.flops, 1.2 * linear);
}

TEST(CostRoofline, DecodeIsNearlyFlatInBatchSize) {
  const RooflineCostModel m = llama_on_h100();
  const TimeNs one = m.iteration_cost(decode_batch(1, 16)).total;
  const TimeNs many = m.iteration_cost(decode_batch(32, 16)).total;
  EXPECT_GT(many, one);
  EXPECT_LT(static_cast<double>(many), 1.3 * static_cast<double>(one));
}

TEST(CostRoofline, DecodeAttentionGrowsLinearlyWithContext) {
  const RooflineCostModel m = llama_on_h100();
  // Beside its K/V reads the kernel takes its launch, its floor and a time per sequence and K/V
  // head (8 sequences, Llama-3-8B's 8 K/V heads), none of which grows with the context.
  const KernelCorrections& k = h100().kernels;
  ASSERT_GT(k.decode_attention_floor_ns, 0);
  const double fixed = static_cast<double>(h100().launch_overhead) + k.decode_attention_floor_ns +
                       8 * 8 * k.decode_attention_ns_per_sequence_head;
  std::vector<double> attention;
  for (std::int64_t context : {1000, 2000, 4000}) {
    attention.push_back(
        duration_of(m.op_breakdown(decode_batch(8, context)), OpKind::attention_decode, 0) - fixed);
  }
  // Time per K/V token read is constant: doubling the context doubles the increment, and the
  // kernel's time less its fixed part.
  EXPECT_NEAR(attention[2] - attention[1], 2 * (attention[1] - attention[0]), 1e-6 * attention[2]);
  EXPECT_NEAR(attention[1] / attention[0], 2.0, 0.01);
  EXPECT_LT(m.iteration_cost(decode_batch(8, 1000)).total,
            m.iteration_cost(decode_batch(8, 4000)).total);
}

TEST(CostRoofline, DoublingBandwidthHalvesMemoryBoundDecode) {
  HardwareSpec fast = bare_h100();
  fast.memory_bandwidth *= 2;
  const IterationCost slow_cost = llama_on_bare_h100().iteration_cost(decode_batch(4, 256));
  const IterationCost fast_cost =
      RooflineCostModel(llama(), fast, {0.7, 0.85}).iteration_cost(decode_batch(4, 256));
  EXPECT_EQ(slow_cost.overhead, fast_cost.overhead);
  const auto body = [](const IterationCost& c) {
    return static_cast<double>(c.total - c.overhead);
  };
  EXPECT_NEAR(body(fast_cost), body(slow_cost) / 2, 0.005 * body(slow_cost));
}

TEST(CostRoofline, LmHeadIsChargedOnlyForEmittingEntries) {
  const RooflineCostModel m = llama_on_h100();
  const std::vector<BatchEntry> silent = {{512, 1024, 32, false}};
  const std::vector<BatchEntry> emitting = {{512, 1024, 32, true}};
  EXPECT_LT(m.iteration_cost(silent).total, m.iteration_cost(emitting).total);
  for (const OpCost& op : m.op_breakdown(silent)) {
    if (op.kind == OpKind::lm_head || op.kind == OpKind::sampling) {
      EXPECT_FALSE(op.launched);
    }
  }
  // Four emitting decode entries pay for four logit rows, but read the LM head weight once.
  const auto head_bytes = [&](int emitters) {
    std::vector<BatchEntry> batch = decode_batch(4, 100);
    for (int i = emitters; i < 4; ++i)
      batch[static_cast<std::size_t>(i)].emits_token = false;
    for (const OpCost& op : m.op_breakdown(batch)) {
      if (op.kind == OpKind::lm_head)
        return op.bytes;
    }
    return 0.0;
  };
  const double row = static_cast<double>((llama().d_model + llama().vocab) * 2);
  EXPECT_DOUBLE_EQ(head_bytes(4) - head_bytes(1), 3 * row);
  EXPECT_DOUBLE_EQ(head_bytes(1), static_cast<double>(llama().vocab * llama().d_model * 2) + row);
}

TEST(CostRoofline, PerTokenDepthPricesEachLayerWithTheEntriesThatReachIt) {
  const RooflineCostModel m = llama_on_h100();
  std::vector<BatchEntry> mixed = decode_batch(16, 2000);
  for (std::size_t i = 0; i < mixed.size(); i += 2)
    mixed[i].depth = 16;
  const TimeNs full = m.iteration_cost(decode_batch(16, 2000)).total;
  const TimeNs half = m.iteration_cost(decode_batch(16, 2000, 16)).total;
  const TimeNs both = m.iteration_cost(mixed).total;
  EXPECT_LT(half, both);
  EXPECT_LT(both, full);
}

TEST(CostRoofline, CriticalPathOnOneStreamIsTheSumOfEveryOp) {
  const RooflineCostModel m = llama_on_h100();
  std::vector<BatchEntry> batch = decode_batch(20, 700);
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i].depth = 8 + static_cast<int>(i % 3) * 8;
  batch.push_back({300, 50, 32, true});
  batch.push_back({64, 0, 12, false});
  const IterationCost c = m.iteration_cost(batch);
  const std::vector<OpCost> ops = m.op_breakdown(batch);
  EXPECT_EQ(ops.size(), 32u * 10 + 3);
  EXPECT_NEAR(static_cast<double>(c.total), breakdown_sum(ops), 1.0);
  double flops = 0;
  for (const OpCost& op : ops)
    flops += op.flops;
  EXPECT_NEAR(c.flops, flops, 1e-9 * flops);
}

TEST(CostRoofline, ManyDistinctDepthsArePricedExactly) {
  // More distinct depths than the fast path keeps: the sweep must agree with the per-layer
  // reference.
  ModelShape deep = *find_model_preset("smollm-135m");
  deep.depth = DepthStructure::plain(60);
  const RooflineCostModel m(deep, h100(), {0.7, 0.85});
  std::vector<BatchEntry> batch;
  for (int d = 1; d <= 50; ++d)
    batch.push_back({1, 10 * d, d, d % 2 == 0});
  batch.push_back({100, 0, 60, true});
  const IterationCost c = m.iteration_cost(batch);
  EXPECT_NEAR(static_cast<double>(c.total), breakdown_sum(m.op_breakdown(batch)), 1.0);
  // Permuting the batch changes nothing.
  std::vector<BatchEntry> reversed(batch.rbegin(), batch.rend());
  EXPECT_EQ(m.iteration_cost(reversed).total, c.total);
}

TEST(CostRoofline, RecursiveModelReadsTheSharedBlockOncePerPass) {
  ModelShape recursive = llama();
  recursive.depth = DepthStructure::middle_cycle(32, 3);  // 1 + 10 x 3 + 1 = 32 executed layers
  const RooflineCostModel r(recursive, h100(), {0.7, 0.85});
  const std::vector<BatchEntry> full = decode_batch(8, 500, recursive.depth.stacked_depth());
  const IterationCost plain_cost = llama_on_h100().iteration_cost(decode_batch(8, 500));
  const IterationCost recursive_cost = r.iteration_cost(full);
  EXPECT_DOUBLE_EQ(recursive_cost.bytes, plain_cost.bytes);
  EXPECT_EQ(recursive_cost.total, plain_cost.total);
  // Exiting after the first recursion skips two passes; the coda still runs.
  const IterationCost early = r.iteration_cost(decode_batch(8, 500, 11));
  const IterationCost eleven_plus_coda = RooflineCostModel(
                                             [&] {
                                               ModelShape m = llama();
                                               m.depth = DepthStructure::plain(12);
                                               return m;
                                             }(),
                                             h100(), {0.7, 0.85})
                                             .iteration_cost(decode_batch(8, 500, 12));
  EXPECT_EQ(early.total, eleven_plus_coda.total);
}

TEST(CostRoofline, LoraAdaptersAddTheirWeightsToTheirRecursion) {
  ModelShape recursive = *find_model_preset("smollm-360m");
  recursive.depth = DepthStructure::middle_cycle(32, 3);
  const RooflineCostModel base(recursive, h100(), {0.7, 0.85});
  recursive.depth.lora_rank = {0, 16, 64};
  const RooflineCostModel lora(recursive, h100(), {0.7, 0.85});
  const std::vector<BatchEntry> batch = decode_batch(4, 100, recursive.depth.stacked_depth());
  const double extra = lora.iteration_cost(batch).bytes - base.iteration_cost(batch).bytes;
  const double adapters =
      static_cast<double>(recursive.depth.block_layers *
                          (recursive.lora_parameters(16) + recursive.lora_parameters(64)) * 2);
  // Weights once per pass, plus nothing else (adapter activations are not modelled).
  EXPECT_DOUBLE_EQ(extra, adapters);
  EXPECT_NEAR(static_cast<double>(lora.iteration_cost(batch).total),
              breakdown_sum(lora.op_breakdown(batch)), 1.0);
  // A token leaving after the first recursion never touches an adapter.
  const std::vector<BatchEntry> early = decode_batch(4, 100, 11);
  EXPECT_EQ(lora.iteration_cost(early).total, base.iteration_cost(early).total);
}

TEST(CostRoofline, PrefillAndDecodeAttentionAreSeparateOps) {
  const RooflineCostModel m = llama_on_h100();
  std::vector<BatchEntry> batch = decode_batch(3, 100);
  const auto launched = [&](const std::vector<BatchEntry>& b, OpKind kind) {
    for (const OpCost& op : m.op_breakdown(b)) {
      if (op.kind == kind && op.layer == 0)
        return op.launched;
    }
    return false;
  };
  EXPECT_TRUE(launched(batch, OpKind::attention_decode));
  EXPECT_FALSE(launched(batch, OpKind::attention_prefill));
  batch.push_back({256, 0, 32, true});
  EXPECT_TRUE(launched(batch, OpKind::attention_prefill));
  // Prefill attention FLOPs: 4 x heads x head_dim x (q c + q (q + 1) / 2).
  for (const OpCost& op : m.op_breakdown(std::vector<BatchEntry>{{100, 50, 32, true}})) {
    if (op.kind == OpKind::attention_prefill && op.layer == 0) {
      EXPECT_DOUBLE_EQ(op.flops, 4.0 * 32 * 128 * (100 * 50 + 100 * 101 / 2));
    }
  }
}

TEST(CostRoofline, EmptyBatchCostsNothing) {
  const RooflineCostModel m = llama_on_h100();
  EXPECT_EQ(m.iteration_cost({}).total, 0);
  const std::vector<BatchEntry> idle = {{0, 100, 32, true}};
  const IterationCost c = m.iteration_cost(idle);
  EXPECT_EQ(c.total, 0);
  EXPECT_EQ(c.flops, 0);
}

TEST(CostRoofline, GraphsHaveTheExpectedOps) {
  const RooflineCostModel m = llama_on_h100();
  EXPECT_EQ(m.name(), "roofline");
  ASSERT_EQ(m.layer_graph().size(), 9);
  EXPECT_EQ(m.layer_graph().op(0).kind, OpKind::input_norm);
  EXPECT_EQ(m.layer_graph().op(8).kind, OpKind::mlp_down);
  ASSERT_EQ(m.head_graph().size(), 3);
  EXPECT_EQ(m.head_graph().op(1).kind, OpKind::lm_head);
  // The attention kernels hang off the QKV projection independently; only the stream orders
  // them.
  bool prefill_to_decode_dependency = false;
  for (const auto& [before, after] : m.layer_graph().edges()) {
    if (before == 2 && after == 3)
      prefill_to_decode_dependency = true;
  }
  EXPECT_TRUE(prefill_to_decode_dependency);  // the stream-order edge
}

}  // namespace
}  // namespace exitsim::sim
