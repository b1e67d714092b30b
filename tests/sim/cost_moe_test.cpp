// Mixtures of experts in the roofline: the router, and an MLP that reads the expected distinct
// experts of the batch's tokens (uniform routing) and computes top_k experts per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

const ModelShape& mixtral() {
  static const ModelShape m = *find_model_preset("mixtral-8x7b");
  return m;
}
const HardwareSpec& h100() {
  static const HardwareSpec h = *find_hardware_preset("h100-sxm");
  return h;
}
constexpr RooflineEfficiency k_efficiency{0.7, 0.85};

std::vector<BatchEntry> decode_batch(int size, std::int64_t context, int depth) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), {1, context, depth, true});
}

std::vector<OpCost> ops_of(const std::vector<OpCost>& all, OpKind kind) {
  std::vector<OpCost> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [&](const OpCost& op) { return op.kind == kind; });
  return out;
}

double total_of(const std::vector<OpCost>& ops, double OpCost::*member) {
  return std::accumulate(ops.begin(), ops.end(), 0.0,
                         [&](double sum, const OpCost& op) { return sum + op.*member; });
}

TEST(MixtureOfExperts, TheLayerRoutesBetweenThePostAttentionNormAndTheMlp) {
  const RooflineCostModel m(mixtral(), h100(), k_efficiency);
  ASSERT_EQ(m.layer_graph().size(), 10);
  EXPECT_EQ(m.layer_graph().op(5).kind, OpKind::post_attention_norm);
  EXPECT_EQ(m.layer_graph().op(6).kind, OpKind::moe_router);
  EXPECT_EQ(m.layer_graph().op(7).kind, OpKind::mlp_gate_up);
  // A dense model has no router.
  const RooflineCostModel dense(*find_model_preset("mistral-7b"), h100(), k_efficiency);
  EXPECT_EQ(dense.layer_graph().size(), 9);
}

// Mixtral 8x7B (d 4096, 8 experts of 14336, top-2, bf16), T decode tokens: the router is a
// d x 8 GEMM; gate/up and down compute 2 experts per token and read 8 (1 - 0.75^T) experts.
TEST(MixtureOfExperts, MlpReadsTheExpectedDistinctExpertsAndComputesTopKPerToken) {
  const RooflineCostModel m(mixtral(), h100(), k_efficiency);
  const double d = 4096;
  const double f = 14336;
  const double b = 2;
  for (const int t : {1, 2, 4, 16, 64}) {
    SCOPED_TRACE(t);
    const std::vector<OpCost> ops = m.op_breakdown(decode_batch(t, 512, 32));
    const double distinct = 8 * (1 - std::pow(0.75, t));
    const OpCost router = ops_of(ops, OpKind::moe_router)[0];
    EXPECT_DOUBLE_EQ(router.flops, 2 * t * d * 8);
    EXPECT_DOUBLE_EQ(router.bytes, d * 8 * b + t * (d + 8) * b);
    const OpCost gate_up = ops_of(ops, OpKind::mlp_gate_up)[0];
    EXPECT_DOUBLE_EQ(gate_up.flops, 2 * t * 2 * d * 2 * f);
    EXPECT_NEAR(gate_up.bytes, distinct * d * 2 * f * b + t * 2 * (d + 2 * f) * b,
                1e-9 * gate_up.bytes);
    const OpCost down = ops_of(ops, OpKind::mlp_down)[0];
    EXPECT_DOUBLE_EQ(down.flops, 2 * t * 2 * f * d);
    EXPECT_NEAR(down.bytes, distinct * f * d * b + t * 2 * (f + d) * b, 1e-9 * down.bytes);
    EXPECT_DOUBLE_EQ(ops_of(ops, OpKind::mlp_activation)[0].flops, 5 * t * 2 * f);
    EXPECT_EQ(ops_of(ops, OpKind::mlp_gate_up).size(), 32U);
  }
  // One token reads exactly its 2 experts' weights.
  const OpCost one = ops_of(m.op_breakdown(decode_batch(1, 512, 32)), OpKind::mlp_down)[0];
  EXPECT_DOUBLE_EQ(one.bytes, 2 * f * d * b + 2 * (f + d) * b);
}

// Under TP every expert splits like the dense MLP; the router is replicated.
TEST(MixtureOfExperts, TensorParallelismSplitsEveryExpertAndReplicatesTheRouter) {
  const std::vector<BatchEntry> batch = decode_batch(4, 512, 32);
  const std::vector<OpCost> one =
      RooflineCostModel(mixtral(), h100(), k_efficiency).op_breakdown(batch);
  const std::vector<OpCost> two =
      RooflineCostModel(mixtral(), h100(), k_efficiency, ParallelSpec{2}).op_breakdown(batch);
  EXPECT_DOUBLE_EQ(ops_of(two, OpKind::moe_router)[0].flops,
                   ops_of(one, OpKind::moe_router)[0].flops);
  for (const OpKind kind : {OpKind::mlp_gate_up, OpKind::mlp_down}) {
    const OpCost a = ops_of(one, kind)[0];
    const OpCost b = ops_of(two, kind)[0];
    EXPECT_DOUBLE_EQ(b.flops * 2, a.flops) << to_string(kind);
    // Weights halve; the activations in (d_model wide) do not.
    const double distinct = 8 * (1 - std::pow(0.75, 4));
    const double weights = distinct * 4096 * 14336 * (kind == OpKind::mlp_gate_up ? 2 : 1) * 2;
    const double activations_one = a.bytes - weights;
    const double activations_two = b.bytes - weights / 2;
    EXPECT_GT(activations_two, activations_one / 2);
    EXPECT_LT(activations_two, activations_one);
  }
}

// The effect: a dense model's decode step costs about the same at batch 1 and 16 (its weights
// are read once either way; 1.07x for the K/V); Mixtral's reads 2 of 8 experts at batch 1 and
// nearly all at 16 (7.92 expected), so its step slows by 3.35x on the bare roofline while it is
// still memory-bound. The H100 preset's kernel corrections (each kernel's floor, the decode
// attention's time per sequence) dilute it further, but it stays over 3x.
TEST(MixtureOfExperts, DecodeStepSlowsWithBatchUntilEveryExpertIsRead) {
  const RooflineCostModel moe(mixtral(), test_support::bare_h100(), k_efficiency);
  const RooflineCostModel dense(*find_model_preset("mistral-7b"), test_support::bare_h100(),
                                k_efficiency);
  const auto ratio = [](const RooflineCostModel& m) {
    return static_cast<double>(m.iteration_cost(decode_batch(16, 512, 32)).total) /
           static_cast<double>(m.iteration_cost(decode_batch(1, 512, 32)).total);
  };
  EXPECT_LT(ratio(dense), 1.1);
  // Weights read: 12.75B at batch 1, 46.07B at 16 (3.6x), diluted by the launches.
  EXPECT_GT(ratio(moe), 3.0);
  EXPECT_NEAR(ratio(moe), 3.353, 0.001);
  const double corrected = ratio(RooflineCostModel(mixtral(), h100(), k_efficiency));
  EXPECT_GT(corrected, 3.0);
  EXPECT_LT(corrected, ratio(moe));
  // At batch 1 the bytes read are the active weights (2 experts a layer) but the embedding
  // table (a gather, not priced), plus K/V and activations: within 1% of them.
  const IterationCost c = moe.iteration_cost(decode_batch(1, 512, 32));
  const double active = static_cast<double>(mixtral().active_parameters_per_token() -
                                            mixtral().vocab * mixtral().d_model) *
                        2;
  EXPECT_NEAR(c.bytes / active, 1.0, 0.01);
  EXPECT_EQ(c.memory_bound + c.overhead, c.total);  // nothing compute-bound at batch 1
}

// Layers see different token counts when entries exit at different depths; the fast path prices
// each group of layers' distinct experts from its own count, as the per-layer reference does.
TEST(MixtureOfExperts, TheFastPathPricesEachLayerGroupsExpertsAsTheReference) {
  const RooflineCostModel m(mixtral(), h100(), k_efficiency);
  std::vector<BatchEntry> batch = decode_batch(40, 700, 32);
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i].depth = 8 + static_cast<int>(i % 4) * 8;
  batch.push_back({300, 100, 32, true});
  const IterationCost c = m.iteration_cost(batch);
  const std::vector<OpCost> ops = m.op_breakdown(batch);
  EXPECT_NEAR(c.bytes, total_of(ops, &OpCost::bytes), 1e-9 * c.bytes);
  EXPECT_NEAR(c.flops, total_of(ops, &OpCost::flops), 1e-9 * c.flops);
  EXPECT_NEAR(static_cast<double>(c.total), total_of(ops, &OpCost::duration_ns), 1.0);
  // Layers 25..32 see 10 decode tokens and the 300-token chunk; layers 1..8 all 340.
  const std::vector<OpCost> down = ops_of(ops, OpKind::mlp_down);
  const double expert = 14336.0 * 4096 * 2;
  const double activations_per_token = 2 * (14336.0 + 4096) * 2;
  EXPECT_NEAR(down[0].bytes, 8 * (1 - std::pow(0.75, 340)) * expert + 340 * activations_per_token,
              1.0);
  EXPECT_NEAR(down[31].bytes, 8 * (1 - std::pow(0.75, 310)) * expert + 310 * activations_per_token,
              1.0);
}

// Monte-Carlo check of the expected distinct experts the roofline prices: draw T tokens' top-k
// expert sets uniformly (each k-subset equally likely, seeded), count the distinct experts, and
// average over 20000 batches. For (experts, top-k) = (8, 2), (16, 4), (64, 6) and T = 1..32 the
// standard error of that mean is at most 0.018 experts and the means are within 0.014 of the
// formula, so the tolerance is 0.1 experts (over 5 standard errors). The effect it must resolve:
// the naive count, T x k capped at E (every token's experts distinct), is 0.5 to 13 experts
// above it wherever batching shares experts (2 <= T and T x k <= 2E), at least 4 tolerances.
struct Routing {
  int experts;
  int top_k;
};

struct Sample {
  double mean;
  double standard_error;
};

Sample simulated_distinct_experts(const Routing& r, int tokens, int trials, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> order(static_cast<std::size_t>(r.experts));
  std::vector<char> hit(static_cast<std::size_t>(r.experts));
  double sum = 0;
  double sum_squares = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::fill(hit.begin(), hit.end(), 0);
    for (int t = 0; t < tokens; ++t) {
      std::iota(order.begin(), order.end(), 0);
      // The first top_k of a partial Fisher-Yates shuffle: a uniform k-subset.
      for (int i = 0; i < r.top_k; ++i) {
        std::uniform_int_distribution<int> pick(i, r.experts - 1);
        std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(pick(rng))]);
        hit[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
      }
    }
    const auto distinct = static_cast<double>(std::count(hit.begin(), hit.end(), 1));
    sum += distinct;
    sum_squares += distinct * distinct;
  }
  const double n = trials;
  const double mean = sum / n;
  const double variance = std::max(0.0, sum_squares / n - mean * mean);
  return {mean, std::sqrt(variance / (n - 1))};
}

// The expected distinct experts the roofline prices for T decode tokens: the gate/up GEMM's bytes
// less its activations, over one expert's weights.
double priced_distinct_experts(const Routing& r, int tokens) {
  ModelShape m;
  m.name = "toy-moe";
  m.d_model = 64;
  m.n_heads = 4;
  m.n_kv_heads = 4;
  m.head_dim = 16;
  m.ffn_dim = 128;
  m.vocab = 256;
  m.experts = r.experts;
  m.experts_per_token = r.top_k;
  m.depth = DepthStructure::plain(1);
  const RooflineCostModel model(m, h100(), k_efficiency);
  const OpCost gate_up =
      ops_of(model.op_breakdown(decode_batch(tokens, 16, 1)), OpKind::mlp_gate_up)[0];
  const double b = 2;
  const double activations = tokens * r.top_k * (64.0 + 2 * 128) * b;
  return (gate_up.bytes - activations) / (64.0 * 2 * 128 * b);
}

TEST(MixtureOfExperts, PricedDistinctExpertsMatchAMonteCarloOfUniformRouting) {
  constexpr int k_trials = 20000;
  constexpr double k_tolerance = 0.1;
  std::uint64_t seed = 20;
  for (const Routing r : {Routing{8, 2}, Routing{16, 4}, Routing{64, 6}}) {
    for (const int tokens : {1, 2, 3, 4, 8, 16, 32}) {
      SCOPED_TRACE(testing::Message()
                   << r.experts << " experts, top-" << r.top_k << ", " << tokens << " tokens");
      const Sample simulated = simulated_distinct_experts(r, tokens, k_trials, ++seed);
      const double priced = priced_distinct_experts(r, tokens);
      EXPECT_NEAR(priced, expected_distinct_experts(r.experts, r.top_k, tokens), 1e-9);
      // The sample resolves the tolerance, and the price lies within it.
      EXPECT_LT(simulated.standard_error, k_tolerance / 5);
      EXPECT_NEAR(priced, simulated.mean, k_tolerance);
      // Where batching shares experts, the naive count misses by far more than the tolerance.
      const double naive = std::min<double>(tokens * r.top_k, r.experts);
      if (tokens >= 2 && tokens * r.top_k <= 2 * r.experts) {
        EXPECT_GT(naive - simulated.mean, 4 * k_tolerance);
      }
    }
  }
}

}  // namespace
}  // namespace exitsim::sim
