// The roofline's kernel corrections (KernelCorrections and the Interconnect's efficiencies and
// latencies; docs/cost_model.md, "Kernel corrections"), one at a time on an otherwise bare H100:
// each has its effect where the conditions for it hold, and none elsewhere, against times
// computed here from each op's FLOPs and bytes. An op's time is
//   (compute^k + memory^k)^(1/k) + fixed + per-unit x feature, then + launch;
// a collective's is its bus bytes at link_bandwidth x link_efficiency + link_latency, then +
// launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

const ModelShape& llama() {
  return test_support::llama_3_8b();
}
using test_support::bare_h100;
using test_support::h100;
constexpr RooflineEfficiency k_efficiency{0.7, 0.85};

double launch_ns() {
  return static_cast<double>(h100().launch_overhead);
}
double peak() {
  return h100().peak_flops_for(DType::bf16);
}
// FLOPs and bytes at the cost model's efficiencies, as the bare roofline prices them.
double compute_ns(const OpCost& op) {
  return op.flops * 1e9 / (peak() * k_efficiency.flops);
}
double memory_ns(const OpCost& op, double bandwidth_share = k_efficiency.bandwidth) {
  return op.bytes * 1e9 / (h100().memory_bandwidth * bandwidth_share);
}
// An op's time less its launch.
double body_ns(const OpCost& op) {
  return op.duration_ns - op.launch_ns;
}

std::vector<BatchEntry> decode_batch(int size, std::int64_t context) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), {1, context, 32, true});
}
std::vector<BatchEntry> prefill(std::int64_t tokens) {
  return {{tokens, 0, 32, true}};
}

std::vector<OpCost> ops(const HardwareSpec& hardware, const std::vector<BatchEntry>& batch,
                        int tensor = 1) {
  return RooflineCostModel(llama(), hardware, k_efficiency, ParallelSpec{tensor})
      .op_breakdown(batch);
}

OpCost op_at(const std::vector<OpCost>& all, OpKind kind, int layer = 0) {
  for (const OpCost& op : all) {
    if (op.kind == kind && op.layer == layer)
      return op;
  }
  ADD_FAILURE() << "no op " << to_string(kind) << " at layer " << layer;
  return {};
}

// A tiny kernel (batch 1's input norm: 40 KB, 14 ns) becomes mostly its floor; a large GEMM (a
// 4,096-token prefill's gate/up projection: 1.4 ms) hardly notices it.
TEST(KernelCorrections, MinKernelTimeAddsToATinyKernelAndIsNegligibleOnALargeGemm) {
  HardwareSpec floored = bare_h100();
  floored.kernels.min_kernel_ns = 5000;
  const OpCost norm = op_at(ops(floored, decode_batch(1, 16)), OpKind::input_norm);
  EXPECT_NEAR(body_ns(norm), memory_ns(norm) + 5000, 1e-6);
  EXPECT_LT(memory_ns(norm), 50);  // the kernel's bytes: under 1% of its floor
  EXPECT_EQ(norm.bound, PriceBound::kernel_floor);

  const OpCost gemm = op_at(ops(floored, prefill(4096)), OpKind::mlp_gate_up);
  EXPECT_NEAR(body_ns(gemm), compute_ns(gemm) + 5000, 1e-3);
  EXPECT_LT(5000 / body_ns(gemm), 0.005);
  EXPECT_EQ(gemm.bound, PriceBound::compute);
}

// CUDA graphs remove the launches (launch_overhead 0), not the kernels' own time: Llama-3-8B's
// decode step at batch 1 stays above its weight reads plus, per layer, 7 kernels at the shortest
// kernel's time and decode attention at its floor and one sequence's 8 K/V heads, plus the head's
// 3 kernels. The rest (activations, 16 tokens of K/V, norms at the element-wise share) is small.
TEST(KernelCorrections, WithoutLaunchesADecodeStepStillPaysEachKernelsMinimumTime) {
  HardwareSpec graphs = h100();
  graphs.launch_overhead = 0;
  const KernelCorrections& k = graphs.kernels;
  ASSERT_GT(k.min_kernel_ns, 0);
  const IterationCost c =
      RooflineCostModel(llama(), graphs, k_efficiency).iteration_cost(decode_batch(1, 16));
  EXPECT_EQ(c.overhead, 0);
  const double embedding_bytes = static_cast<double>(llama().vocab * llama().d_model * 2);
  const double weights_ns = (static_cast<double>(llama().weight_bytes()) - embedding_bytes) * 1e9 /
                            (graphs.memory_bandwidth * k_efficiency.bandwidth);
  const double fixed_ns = 32 * (7 * k.min_kernel_ns + k.decode_attention_floor_ns +
                                8 * k.decode_attention_ns_per_sequence_head) +
                          3 * k.min_kernel_ns;
  const double floor = weights_ns + fixed_ns;
  EXPECT_GT(static_cast<double>(c.total), floor);
  EXPECT_LT(static_cast<double>(c.total), 1.01 * floor);
  // So it stays above its weight reads and 9 minimum kernel times a layer, though only 8 kernels
  // a layer run at decode: decode attention's floor alone is nearly three.
  EXPECT_GT(static_cast<double>(c.total), weights_ns + 9 * 32 * k.min_kernel_ns);
}

// With ridge exponent 2, compute and memory blend as sqrt(compute^2 + memory^2): an op at the
// ridge (its bandwidth chosen so that both times are equal) takes sqrt(2) x either; an op far
// from it (batch 1's gate/up projection, 1/240 of the ridge's intensity) barely more than the
// larger.
TEST(KernelCorrections, RidgeExponentTwoGivesSqrtTwoAtTheRidgeAndNothingFarFromIt) {
  const OpCost bare = op_at(ops(bare_h100(), prefill(64)), OpKind::mlp_gate_up);
  HardwareSpec balanced = bare_h100();
  balanced.memory_bandwidth =
      bare.bytes * peak() * k_efficiency.flops / (bare.flops * k_efficiency.bandwidth);
  balanced.kernels.ridge_exponent = 2;
  const OpCost at_ridge = op_at(ops(balanced, prefill(64)), OpKind::mlp_gate_up);
  EXPECT_NEAR(body_ns(at_ridge), std::sqrt(2.0) * compute_ns(bare), 1e-9 * body_ns(at_ridge));
  HardwareSpec plain_balanced = balanced;
  plain_balanced.kernels.ridge_exponent = 0;
  const OpCost at_ridge_plain = op_at(ops(plain_balanced, prefill(64)), OpKind::mlp_gate_up);
  EXPECT_NEAR(body_ns(at_ridge) / body_ns(at_ridge_plain), std::sqrt(2.0), 1e-9);

  HardwareSpec blended = bare_h100();
  blended.kernels.ridge_exponent = 2;
  const OpCost far = op_at(ops(blended, decode_batch(1, 16)), OpKind::mlp_gate_up);
  const double ratio = compute_ns(far) / memory_ns(far);
  ASSERT_LT(ratio, 0.01);
  EXPECT_NEAR(body_ns(far), memory_ns(far) * std::sqrt(1 + ratio * ratio), 1e-6);
  EXPECT_NEAR(body_ns(far) / memory_ns(far), 1.0, 1e-4);
}

// The presets' exponent, 1.5: (c^1.5 + m^1.5)^(1/1.5) against std::pow, at the ridge (2^(2/3))
// and across the ratios of compute to memory a batch sweeps (the price takes it by a polynomial,
// within 2e-8).
TEST(KernelCorrections, RidgeExponentOneAndAHalfBlendsAsItsPowerSays) {
  HardwareSpec blended = bare_h100();
  blended.kernels.ridge_exponent = 1.5;
  for (const std::int64_t tokens : {16, 64, 128, 256, 512, 1024, 4096}) {
    const OpCost op = op_at(ops(blended, prefill(tokens)), OpKind::mlp_gate_up);
    const double c = compute_ns(op);
    const double m = memory_ns(op);
    const double expected = std::pow(std::pow(c, 1.5) + std::pow(m, 1.5), 1 / 1.5);
    EXPECT_NEAR(body_ns(op), expected, 3e-8 * expected) << tokens << " tokens";
  }
  const OpCost bare = op_at(ops(bare_h100(), prefill(64)), OpKind::mlp_gate_up);
  HardwareSpec balanced = blended;
  balanced.memory_bandwidth =
      bare.bytes * peak() * k_efficiency.flops / (bare.flops * k_efficiency.bandwidth);
  const OpCost at_ridge = op_at(ops(balanced, prefill(64)), OpKind::mlp_gate_up);
  EXPECT_NEAR(body_ns(at_ridge), std::cbrt(4.0) * compute_ns(bare), 3e-8 * body_ns(at_ridge));
}

// Element-wise kernels (norms, the activation, sampling) read at their own share of the
// bandwidth; GEMMs and attention keep the cost model's.
TEST(KernelCorrections, ElementwiseEfficiencyChangesNormsButNotGemms) {
  HardwareSpec slow_norms = bare_h100();
  slow_norms.kernels.elementwise_efficiency = 0.5;
  const std::vector<BatchEntry> batch = decode_batch(8, 512);
  const std::vector<OpCost> bare = ops(bare_h100(), batch);
  const std::vector<OpCost> corrected = ops(slow_norms, batch);
  for (const OpKind kind :
       {OpKind::input_norm, OpKind::post_attention_norm, OpKind::mlp_activation}) {
    const OpCost op = op_at(corrected, kind);
    EXPECT_NEAR(body_ns(op), memory_ns(op, 0.5), 1e-6) << to_string(kind);
    EXPECT_NEAR(body_ns(op) / body_ns(op_at(bare, kind)), 0.85 / 0.5, 1e-9) << to_string(kind);
  }
  for (const OpKind kind : {OpKind::final_norm, OpKind::sampling}) {
    EXPECT_NEAR(body_ns(op_at(corrected, kind, -1)), memory_ns(op_at(corrected, kind, -1), 0.5),
                1e-6)
        << to_string(kind);
  }
  for (const OpKind kind : {OpKind::qkv_projection, OpKind::output_projection, OpKind::mlp_gate_up,
                            OpKind::mlp_down, OpKind::attention_decode}) {
    EXPECT_EQ(op_at(corrected, kind).duration_ns, op_at(bare, kind).duration_ns) << to_string(kind);
  }
  EXPECT_EQ(op_at(corrected, OpKind::lm_head, -1).duration_ns,
            op_at(bare, OpKind::lm_head, -1).duration_ns);
}

// Decode attention takes its floor in place of the shortest kernel's time, and a time per sequence
// and K/V head of the GPU's shard: Llama-3-8B has 8 K/V heads, 4 on each GPU at TP 2. At a short
// context the K/V bytes are small beside them: 64 sequences cost 64 x 8 of the per-head time
// against one sequence's 8.
TEST(KernelCorrections, DecodeAttentionTakesItsFloorAndATimePerSequenceAndKvHead) {
  HardwareSpec attention = bare_h100();
  attention.kernels.min_kernel_ns = 5000;
  attention.kernels.decode_attention_floor_ns = 14000;
  attention.kernels.decode_attention_ns_per_sequence_head = 30;
  const auto attention_ns = [&](int sequences, int tensor) {
    const OpCost op =
        op_at(ops(attention, decode_batch(sequences, 16), tensor), OpKind::attention_decode);
    return body_ns(op) - memory_ns(op);
  };
  EXPECT_NEAR(attention_ns(1, 1), 14000 + 1 * 8 * 30, 1e-6);
  EXPECT_NEAR(attention_ns(64, 1), 14000 + 64 * 8 * 30, 1e-6);
  EXPECT_NEAR(attention_ns(64, 2), 14000 + 64 * 4 * 30, 1e-6);
  // The bytes at context 16 are well under the fixed part at 64 sequences.
  const OpCost wide = op_at(ops(attention, decode_batch(64, 16)), OpKind::attention_decode);
  EXPECT_LT(memory_ns(wide), 0.5 * (14000 + 64 * 8 * 30));
  EXPECT_EQ(wide.bound, PriceBound::attention_floor);
  // Without a floor of its own, decode attention takes the shortest kernel's time.
  attention.kernels.decode_attention_floor_ns = 0;
  EXPECT_NEAR(attention_ns(1, 1), 5000 + 8 * 30, 1e-6);
  // Prefill attention takes neither.
  const OpCost prefill_attention = op_at(ops(attention, prefill(16)), OpKind::attention_prefill);
  EXPECT_NEAR(body_ns(prefill_attention),
              std::max(compute_ns(prefill_attention), memory_ns(prefill_attention)) + 5000, 1e-6);
}

// Prefill attention reaches its own share of peak FLOP/s; nothing else changes.
TEST(KernelCorrections, PrefillAttentionEfficiencyChangesOnlyPrefillAttention) {
  HardwareSpec flash = bare_h100();
  flash.kernels.prefill_attention_efficiency = 0.5;
  const std::vector<BatchEntry> batch = {{4096, 0, 32, true}, {1, 700, 32, true}};
  const std::vector<OpCost> bare = ops(bare_h100(), batch);
  const std::vector<OpCost> corrected = ops(flash, batch);
  ASSERT_EQ(bare.size(), corrected.size());
  for (std::size_t i = 0; i < bare.size(); ++i) {
    if (corrected[i].kind == OpKind::attention_prefill) {
      const OpCost& op = corrected[i];
      ASSERT_TRUE(op.compute_bound);
      EXPECT_NEAR(body_ns(op), op.flops * 1e9 / (peak() * 0.5), 1e-9 * body_ns(op));
      EXPECT_NEAR(body_ns(op) / body_ns(bare[i]), 0.7 / 0.5, 1e-9);
    } else {
      EXPECT_EQ(corrected[i].duration_ns, bare[i].duration_ns)
          << to_string(corrected[i].kind) << " at layer " << corrected[i].layer;
    }
  }
}

// An all-reduce is one fixed latency, whatever the group's size, plus its ring's bus bytes
// (2(p-1)/p of the activations) at the link's collective efficiency; without one, at the cost
// model's bandwidth efficiency.
TEST(KernelCorrections, ACollectiveIsAFixedLatencyPlusBusBytesAtTheLinksShare) {
  HardwareSpec nccl = bare_h100();
  nccl.interconnect.link_latency = 29000;
  nccl.interconnect.link_efficiency = 0.78;
  const std::vector<BatchEntry> batch = decode_batch(16, 300);
  const double activations = 16.0 * static_cast<double>(llama().d_model) * 2;
  for (const int p : {2, 4, 8}) {
    SCOPED_TRACE(p);
    const double bus_bytes = 2.0 * (p - 1) / p * activations;
    const OpCost reduce = op_at(ops(nccl, batch, p), OpKind::tp_all_reduce);
    EXPECT_TRUE(reduce.communication);
    EXPECT_NEAR(body_ns(reduce), 29000 + bus_bytes * 1e9 / (450e9 * 0.78), 1e-6);
    HardwareSpec default_share = nccl;
    default_share.interconnect.link_efficiency = 0;
    EXPECT_NEAR(body_ns(op_at(ops(default_share, batch, p), OpKind::tp_all_reduce)),
                29000 + bus_bytes * 1e9 / (450e9 * k_efficiency.bandwidth), 1e-6);
  }
}

// A pipeline hand-off within a node is a send: its latency is send_latency, not the collectives'
// link_latency. One sequence crosses both stages, so the step is the unsplit one's plus the
// hand-off: hidden state and residual at the link's share, the send's latency and a launch.
TEST(KernelCorrections, AHandOffWithinANodeTakesTheSendLatency) {
  ModelShape five = llama();
  five.depth = DepthStructure::plain(5);
  const std::vector<BatchEntry> one = {{1, 1000, 5, true}};
  const auto added_ns = [&](const HardwareSpec& hardware) {
    const double unsplit = static_cast<double>(
        RooflineCostModel(five, hardware, k_efficiency).iteration_cost(one).total);
    const double split =
        static_cast<double>(RooflineCostModel(five, hardware, k_efficiency, ParallelSpec{1, 2})
                                .iteration_cost(one)
                                .total);
    return split - unsplit;
  };
  HardwareSpec node = bare_h100();
  node.interconnect.link_latency = 29000;
  node.interconnect.send_latency = 8000;
  node.interconnect.link_efficiency = 0.78;
  const double bytes = 2.0 * static_cast<double>(five.d_model) * 2;
  EXPECT_NEAR(added_ns(node), bytes * 1e9 / (450e9 * 0.78) + 8000 + launch_ns(), 1.0);
  HardwareSpec slower_collectives = node;
  slower_collectives.interconnect.link_latency = 100000;
  EXPECT_NEAR(added_ns(slower_collectives), added_ns(node), 1.0);
  HardwareSpec slower_send = node;
  slower_send.interconnect.send_latency = 20000;
  EXPECT_NEAR(added_ns(slower_send) - added_ns(node), 12000, 2.0);
}

std::string scenario_error(const std::string& set) {
  try {
    scenario::load_default_scenario(std::vector<std::string>{set});
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string cost_model_error(const HardwareSpec& hardware) {
  try {
    RooflineCostModel(llama(), hardware, k_efficiency);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Out of range, in a scenario or in a spec built in code: refused with one line naming the key,
// the value in the key's unit.
TEST(KernelCorrections, OutOfRangeCorrectionsAreRefusedNamingTheKey) {
  EXPECT_EQ(scenario_error("hardware.min_kernel_us=-1"),
            "--set: hardware.min_kernel_us: expected a number in [0, 1000000], found -1");
  EXPECT_EQ(scenario_error("hardware.link_efficiency=2"),
            "--set: hardware.link_efficiency: expected a number in [0, 1], found 2");
  HardwareSpec negative = h100();
  negative.kernels.min_kernel_ns = -1000;  // -1 us
  EXPECT_EQ(cost_model_error(negative),
            "hardware.min_kernel_us: expected a time in [0, 1e6] us, found -1");
  HardwareSpec long_floor = h100();
  long_floor.kernels.decode_attention_floor_ns = 2e9;  // 2e6 us
  EXPECT_EQ(cost_model_error(long_floor),
            "hardware.decode_attention_floor_us: expected a time in [0, 1e6] us, found 2000000");
  HardwareSpec over = h100();
  over.interconnect.link_efficiency = 2;
  EXPECT_EQ(cost_model_error(over),
            "hardware.link_efficiency: expected a fraction in [0, 1] (0: the cost model's "
            "bandwidth efficiency), found 2");
}

}  // namespace
}  // namespace exitsim::sim
