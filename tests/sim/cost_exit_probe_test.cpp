// The confidence probe at exit points: a confidence policy decides by running the LM head on the
// tokens still running at each exit point below the stack's top, as the engine's decode pass
// does; the roofline prices it in closed form, and under TP adds the all-reduce of the shards'
// softmax statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exitsim/sim/cost/roofline.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

using test_support::h100;
constexpr RooflineEfficiency k_efficiency{0.7, 0.85};

// Llama-3-8B with LayerSkip-style exit points at 8, 16, 24 and 32 layers.
ModelShape with_exits() {
  ModelShape m = test_support::llama_3_8b();
  m.depth.exit_points = {8, 16, 24, 32};
  return m;
}

// One op on the H100 preset (docs/cost_model.md, "Kernel corrections"): its compute time at the
// flops efficiency and its memory time at the bandwidth efficiency (an element-wise kernel's at
// the preset's element-wise share of the bandwidth), blended across the ridge as
// (compute^k + memory^k)^(1/k), plus the shortest kernel's time and a launch.
double op_ns(double flops, double bytes, bool elementwise) {
  const KernelCorrections& k = h100().kernels;
  const double compute = flops * 1e9 / (h100().peak_flops_for(DType::bf16) * k_efficiency.flops);
  const double share = elementwise ? k.elementwise_efficiency : k_efficiency.bandwidth;
  const double memory = bytes * 1e9 / (h100().memory_bandwidth * share);
  const double e = k.ridge_exponent;
  return std::pow(std::pow(compute, e) + std::pow(memory, e), 1 / e) + k.min_kernel_ns +
         static_cast<double>(h100().launch_overhead);
}

// The probe of n tokens on one GPU of a TP group of p: the fused norm (element-wise), the LM
// head over the GPU's vocabulary shard, one pass of softmax statistics over it (element-wise),
// and under TP the ring all-reduce of four fp32 statistics per token: its bus bytes at the link's
// collective efficiency and one collective's fixed latency.
double probe_ns(double n, int p) {
  const double d = 4096;
  const double vocab = std::ceil(128256.0 / p);
  double ns = op_ns(4 * d * n, 4 * d * 2 * n + d * 2, true) +
              op_ns(2 * d * vocab * n, (d + vocab) * 2 * n + d * vocab * 2, false) +
              op_ns(5 * vocab * n, vocab * 2 * n, true);
  if (p > 1) {
    const Interconnect& link = h100().interconnect;
    ns += 2.0 * (p - 1) / p * 16 * n * 1e9 / (link.link_bandwidth * link.link_efficiency) +
          static_cast<double>(link.link_latency) + static_cast<double>(h100().launch_overhead);
  }
  return ns;
}

// Decode tokens that exit at 8, 16 and 32 (twice), and a prefill chunk, which is not probed.
std::vector<BatchEntry> batch() {
  return {{1, 500, 8, true},
          {1, 700, 16, true},
          {1, 900, 32, true},
          {1, 300, 32, true},
          {256, 0, 32, true}};
}

double total_ns(const RooflineCostModel& model, const std::vector<BatchEntry>& b) {
  return static_cast<double>(model.iteration_cost(b).total);
}

// At 8 all four decode tokens are probed, at 16 the three that went on, at 24 the two deepest;
// at 32, the top, nobody decides. Each probe reads the whole LM head: about 0.38 ms on an H100,
// against a decode step of a few ms.
TEST(ExitProbe, EachExitPointProbesTheDecodeTokensStillRunningThere) {
  for (const int p : {1, 2}) {
    SCOPED_TRACE(p);
    const RooflineCostModel plain(with_exits(), h100(), k_efficiency, ParallelSpec{p, 1});
    const RooflineCostModel probing(with_exits(), h100(), k_efficiency, ParallelSpec{p, 1}, true);
    const double added = total_ns(probing, batch()) - total_ns(plain, batch());
    EXPECT_NEAR(added, probe_ns(4, p) + probe_ns(3, p) + probe_ns(2, p), 3.0);
    if (p == 1) {
      EXPECT_GT(probe_ns(1, 1), 360e3);
    }
    // The breakdown lists them at the layer below each point.
    double listed = 0;
    for (const OpCost& op : probing.op_breakdown(batch())) {
      if (op.launched && (op.kind == OpKind::probe_norm || op.kind == OpKind::probe_head ||
                          op.kind == OpKind::probe_softmax || op.kind == OpKind::probe_reduce)) {
        EXPECT_TRUE(op.layer == 7 || op.layer == 15 || op.layer == 23) << op.layer;
        listed += op.duration_ns;
      }
    }
    EXPECT_NEAR(listed, added, 3.0);
  }
}

// A batch_sync rider has exited at its useful depth and is not probed again above it; a token
// that starts mid-stack (depth-wise batching's second pass) is probed only above its start.
TEST(ExitProbe, RidersAndMidStackStartsAreProbedOnlyWhereTheyDecide) {
  const RooflineCostModel plain(with_exits(), h100(), k_efficiency);
  const RooflineCostModel probing(with_exits(), h100(), k_efficiency, {}, true);
  std::vector<BatchEntry> riders = {{1, 500, 32, true}, {1, 600, 32, true}};
  riders[0].useful_depth = 8;   // probed at 8 only
  riders[1].useful_depth = 24;  // probed at 8, 16 and 24
  EXPECT_NEAR(total_ns(probing, riders) - total_ns(plain, riders),
              probe_ns(2, 1) + 2 * probe_ns(1, 1), 3.0);
  std::vector<BatchEntry> resumed = {{1, 500, 32, true}};
  resumed[0].start_depth = 16;  // probed at 24
  EXPECT_NEAR(total_ns(probing, resumed) - total_ns(plain, resumed), probe_ns(1, 1), 3.0);
}

// Under pipeline parallelism a probe runs on the stage holding the layer below its point: at PP 2
// (layers 0-15 and 16-31) the probes at 8 and 16 are stage 0's, the one at 24 stage 1's. One
// sequence crosses both stages in turn, so it waits for all three.
TEST(ExitProbe, AProbeRunsOnTheStageOfItsExitPoint) {
  const RooflineCostModel plain(with_exits(), h100(), k_efficiency, ParallelSpec{1, 2});
  const RooflineCostModel probing(with_exits(), h100(), k_efficiency, ParallelSpec{1, 2}, true);
  const std::vector<BatchEntry> one = {{1, 500, 32, true}};
  EXPECT_NEAR(total_ns(probing, one) - total_ns(plain, one), 3 * probe_ns(1, 1), 3.0);
}

}  // namespace
}  // namespace exitsim::sim
