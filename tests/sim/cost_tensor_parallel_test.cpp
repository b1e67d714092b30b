// Tensor parallelism in the roofline: each op is one GPU's shard, and the layer and the head gain
// their collectives, priced in closed form as rings over the node's link: a fixed latency per
// collective and the bytes one GPU sends at the link's collective efficiency.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/kv_capacity.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

const ModelShape& llama() {
  return test_support::llama_3_8b();
}
using test_support::h100;
constexpr RooflineEfficiency k_efficiency{0.7, 0.85};

RooflineCostModel at_degree(int tensor) {
  return RooflineCostModel(llama(), h100(), k_efficiency, ParallelSpec{tensor});
}

std::vector<BatchEntry> decode_batch(int size, std::int64_t context) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), {1, context, 32, true});
}

std::vector<OpCost> ops_of(const std::vector<OpCost>& all, OpKind kind) {
  std::vector<OpCost> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [&](const OpCost& op) { return op.kind == kind; });
  return out;
}

// A mixed batch: decode at several contexts and a prefill chunk, so that both attention kernels,
// every GEMM and the head run.
std::vector<BatchEntry> mixed_batch() {
  std::vector<BatchEntry> batch = decode_batch(24, 900);
  batch.push_back({512, 128, 32, true});
  return batch;
}

TEST(TensorParallel, ShardedGemmsDoAPthOfTheWorkAndEachLayerAddsTwoRingAllReduces) {
  const std::vector<BatchEntry> batch = mixed_batch();
  const double tokens = 24 + 512;
  const std::vector<OpCost> one = at_degree(1).op_breakdown(batch);
  for (const int p : {2, 4, 8}) {
    SCOPED_TRACE(p);
    const std::vector<OpCost> sharded = at_degree(p).op_breakdown(batch);
    for (const OpKind kind :
         {OpKind::qkv_projection, OpKind::output_projection, OpKind::mlp_gate_up, OpKind::mlp_down,
          OpKind::attention_decode, OpKind::attention_prefill, OpKind::lm_head}) {
      const std::vector<OpCost> a = ops_of(one, kind);
      const std::vector<OpCost> b = ops_of(sharded, kind);
      ASSERT_EQ(a.size(), b.size()) << to_string(kind);
      // llama-3-8b's 8 K/V heads split up to 8 ways, so even the K/V part divides by p; its
      // vocabulary (128256) divides by 2, 4 and 8.
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_DOUBLE_EQ(b[i].flops * p, a[i].flops) << to_string(kind) << " layer " << a[i].layer;
    }
    // Norms are replicated: the same work on every GPU.
    EXPECT_DOUBLE_EQ(ops_of(sharded, OpKind::input_norm)[0].flops,
                     ops_of(one, OpKind::input_norm)[0].flops);
    EXPECT_TRUE(ops_of(one, OpKind::tp_all_reduce).empty());

    // Two all-reduces per layer of tokens x d_model bf16 values: 2(p-1)/p of them (the ring's
    // bus bytes) sent over the link at its collective efficiency, plus the collective's fixed
    // latency, whatever p, and a launch.
    const std::vector<OpCost> reduces = ops_of(sharded, OpKind::tp_all_reduce);
    ASSERT_EQ(reduces.size(), 2U * 32);
    const Interconnect& link = h100().interconnect;
    ASSERT_GT(link.link_efficiency, 0);
    const double bytes = tokens * static_cast<double>(llama().d_model) * 2;
    const double link_bytes_per_ns = link.link_bandwidth * link.link_efficiency / 1e9;
    const double latency = static_cast<double>(link.link_latency);
    const double expected = 2.0 * (p - 1) / p * bytes / link_bytes_per_ns + latency +
                            static_cast<double>(h100().launch_overhead);
    for (const OpCost& reduce : reduces) {
      EXPECT_NEAR(reduce.duration_ns, expected, 1e-9 * expected);
      EXPECT_TRUE(reduce.communication);
      EXPECT_EQ(reduce.flops, 0.0);
    }
    // The head's logits: the (p-1)/p of each emitting token's vocabulary row that arrives at
    // the sampling GPU, plus one collective's latency.
    const std::vector<OpCost> gather = ops_of(sharded, OpKind::logits_gather);
    ASSERT_EQ(gather.size(), 1U);
    const double logits = 25.0 * static_cast<double>(llama().vocab) * 2;
    EXPECT_NEAR(gather[0].duration_ns,
                (p - 1.0) / p * logits / link_bytes_per_ns + latency +
                    static_cast<double>(h100().launch_overhead),
                1.0);
  }
}

TEST(TensorParallel, TheFastPathPricesTheGraphWithItsCollectives) {
  const RooflineCostModel m = at_degree(4);
  std::vector<BatchEntry> batch = mixed_batch();
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i].depth = 8 + static_cast<int>(i % 4) * 8;
  const IterationCost c = m.iteration_cost(batch);
  double sum = 0;
  double communication = 0;
  for (const OpCost& op : m.op_breakdown(batch)) {
    sum += op.duration_ns;
    if (op.communication)
      communication += op.duration_ns - static_cast<double>(h100().launch_overhead);
  }
  // One stream's worth of dependencies: the layer is a chain through its all-reduces.
  EXPECT_NEAR(static_cast<double>(c.total), sum, 1.0);
  EXPECT_NEAR(static_cast<double>(c.communication), communication, 1.0);
  EXPECT_EQ(c.total, c.compute_bound + c.memory_bound + c.communication + c.overhead);
  // Small decode batches (under the token table's 64) take the same prices as computed.
  const std::vector<BatchEntry> small = decode_batch(5, 300);
  double small_sum = 0;
  for (const OpCost& op : m.op_breakdown(small))
    small_sum += op.duration_ns;
  EXPECT_NEAR(static_cast<double>(m.iteration_cost(small).total), small_sum, 1.0);
}

// A memory-bound decode step of an 8B model: each GPU reads half the weights at TP 2, but pays
// 64 all-reduces and a logits gather of 29 us each (the H100 preset's fixed collective latency,
// NCCL's, fitted to Vidur's profiles), which TP does not split, beside the kernels' launches and
// floors. At 8 sequences of 1,024 tokens it is only 1.09x faster (8.37 ms against 7.66 ms, of
// which 1.90 ms are the collectives); without their latency it would be 1.45x. Where the halved
// K/V reads dominate (64 sequences of 4,096 tokens) TP 2 still gains 1.48x.
TEST(TensorParallel, MemoryBoundDecodeAtTp2OnNvlinkGainsLittleWhileAllReduceLatencyDominates) {
  const auto speedup = [](const HardwareSpec& hardware, int sequences, std::int64_t context) {
    const std::vector<BatchEntry> batch = decode_batch(sequences, context);
    const double one = static_cast<double>(
        RooflineCostModel(llama(), hardware, k_efficiency).iteration_cost(batch).total);
    const double two =
        static_cast<double>(RooflineCostModel(llama(), hardware, k_efficiency, ParallelSpec{2})
                                .iteration_cost(batch)
                                .total);
    return one / two;
  };
  const double small = speedup(h100(), 8, 1024);
  EXPECT_GT(small, 1.0);
  EXPECT_LT(small, 1.2);
  // The 65 collectives' fixed latency is most of the step's communication.
  const IterationCost two = at_degree(2).iteration_cost(decode_batch(8, 1024));
  const double latencies = 65 * static_cast<double>(h100().interconnect.link_latency);
  EXPECT_GT(static_cast<double>(two.communication), latencies);
  EXPECT_LT(static_cast<double>(two.communication), 1.05 * latencies);
  HardwareSpec no_latency = h100();
  no_latency.interconnect.link_latency = 0;
  EXPECT_GT(speedup(no_latency, 8, 1024), 1.3);
  EXPECT_GT(speedup(h100(), 64, 4096), 1.3);
}

TEST(TensorParallel, KvCapacityHoldsOneGpusShareOfEveryToken) {
  const KvCapacity one = derive_kv_capacity(llama(), h100(), {16, 0, 0.1, 0, ParallelSpec{1, 1}});
  const KvCapacity two = derive_kv_capacity(llama(), h100(), {16, 0, 0.1, 0, ParallelSpec{2, 1}});
  EXPECT_EQ(two.kv_bytes_per_token * 2, one.kv_bytes_per_token);
  // The embedding, the head and every linear split in two; the norms do not.
  const std::int64_t norms = (32 * 2 + 1) * llama().d_model * 2;
  EXPECT_EQ((two.weight_bytes - norms) * 2, one.weight_bytes - norms);
  EXPECT_GT(two.blocks, 2 * one.blocks);  // half the weights leave more than twice the room
  // K/V heads fewer than the degree are replicated: tinyllama's 4 on 8 GPUs hold one each.
  const ModelShape tiny = *find_model_preset("tinyllama-1.1b");
  const KvCapacity eight = derive_kv_capacity(tiny, h100(), {16, 0, 0.1, 0, ParallelSpec{8, 1}});
  EXPECT_EQ(eight.kv_bytes_per_token, 22 * 2 * tiny.head_dim * 2);
}

TEST(TensorParallel, ShardsThatDoNotDivideAreRefusedNamingTheDegree) {
  const auto error = [](const ModelShape& model, int tensor, const HardwareSpec& hardware) {
    try {
      RooflineCostModel(model, hardware, k_efficiency, ParallelSpec{tensor});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(llama(), 3, h100()),
            "parallel.tensor: expected a divisor of the 32 attention heads of llama-3-8b, found 3");
  EXPECT_EQ(error(llama(), 16, h100()),
            "parallel.tensor: expected at most the 8 GPUs of one h100-sxm node (TP all-reduces "
            "twice per layer over the node's link), found 16");
  // smollm-360m: 15 heads, 5 K/V heads; 3 divides the heads, and neither divides nor is a
  // multiple of the K/V heads.
  EXPECT_EQ(error(*find_model_preset("smollm-360m"), 3, h100()),
            "parallel.tensor: expected a divisor or a multiple of the 5 K/V heads of smollm-360m "
            "(K/V heads are split, or replicated one per GPU), found 3");
  ModelShape odd = llama();
  odd.ffn_dim = 14337;
  EXPECT_EQ(error(odd, 2, h100()),
            "parallel.tensor: expected a divisor of the MLP's 14337 hidden units, found 2");
  odd.experts = 8;
  odd.experts_per_token = 2;
  EXPECT_EQ(error(odd, 2, h100()),
            "parallel.tensor: expected a divisor of each expert's 14337 hidden units, found 2");
  HardwareSpec lone = h100();
  lone.interconnect.link_bandwidth = 0;
  EXPECT_EQ(error(llama(), 2, lone),
            "hardware.link_bandwidth_gbps: expected a positive link bandwidth for "
            "parallel.tensor 2 and parallel.pipeline 1, found 0");
}

}  // namespace
}  // namespace exitsim::sim
