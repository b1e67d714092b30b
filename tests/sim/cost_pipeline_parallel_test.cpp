// Pipeline parallelism in the roofline: the stage split, the activation hand-offs, and the
// micro-batch cycle of vLLM's virtual engines, checked in closed form against the unsplit
// model's own per-op prices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/roofline.hpp"
#include "exitsim/sim/kv_capacity.hpp"
#include "support/presets.hpp"

namespace exitsim::sim {
namespace {

using test_support::h100;
constexpr RooflineEfficiency k_efficiency{0.7, 0.85};

// Llama-3-8B's layer, five of them: split 3 + 2 over two stages, the LM head on the second. An
// 8192-word vocabulary keeps the head (67 MB) well under a layer (436 MB), so that stage 0 is
// the slower.
ModelShape five_layers() {
  ModelShape m = test_support::llama_3_8b();
  m.depth = DepthStructure::plain(5);
  m.vocab = 8192;
  return m;
}

RooflineCostModel pipelined(const ModelShape& model, ParallelSpec parallel,
                            const HardwareSpec& hardware = h100()) {
  return RooflineCostModel(model, hardware, k_efficiency, parallel);
}

std::vector<BatchEntry> decode_batch(int size, std::int64_t context, int depth) {
  return std::vector<BatchEntry>(static_cast<std::size_t>(size), {1, context, depth, true});
}

// One stage's time for `batch` on its own, from the unsplit model's per-op prices: the layers
// [first, last) and, on the last stage, the head. Each op of a TP 1 layer waits for the one
// before it, so a stage's time is the sum of its ops.
double stage_ns(const ModelShape& model, const std::vector<BatchEntry>& batch, int first, int last,
                bool head) {
  double ns = 0;
  for (const OpCost& op : pipelined(model, {}).op_breakdown(batch)) {
    const bool in_stage = op.layer >= first && op.layer < last;
    if (op.launched && (in_stage || (head && op.layer < 0)))
      ns += op.duration_ns;
  }
  return ns;
}

// The activations of `tokens` tokens handed from one stage to the next: hidden state and
// residual, bf16, over a link of `bandwidth` at `efficiency`'s share of it, plus the send's
// latency and a launch.
double hand_off_ns(const ModelShape& model, double tokens, double bandwidth, double efficiency,
                   double latency_ns) {
  const double bytes = tokens * 2 * static_cast<double>(model.d_model) * 2;
  return bytes * 1e9 / (bandwidth * efficiency) + latency_ns +
         static_cast<double>(h100().launch_overhead);
}

// A hand-off to a GPU of the same node: over NVLink (450 GB/s each way on the H100 preset) at its
// collective efficiency (0.78), after one send's latency (8 us).
double within_node_hand_off_ns(const ModelShape& model, double tokens) {
  const Interconnect& link = h100().interconnect;
  return hand_off_ns(model, tokens, link.link_bandwidth, link.link_efficiency,
                     static_cast<double>(link.send_latency));
}

TEST(PipelineSplit, FollowsVllmAndGivesTheRemainderToTheStagesBeforeTheLast) {
  const auto layers_of = [](int layers, int stages) {
    std::vector<int> out;
    for (const PipelineStage& s : split_pipeline(layers, stages))
      out.push_back(s.layers());
    return out;
  };
  EXPECT_EQ(layers_of(5, 2), (std::vector<int>{3, 2}));
  EXPECT_EQ(layers_of(80, 3), (std::vector<int>{27, 27, 26}));
  EXPECT_EQ(layers_of(126, 4), (std::vector<int>{31, 32, 32, 31}));
  EXPECT_EQ(layers_of(32, 32), std::vector<int>(32, 1));
  const std::vector<PipelineStage> split = split_pipeline(80, 3);
  EXPECT_TRUE(split.front().first_stage && !split.front().last_stage);
  EXPECT_TRUE(split.back().last_stage && !split.back().first_stage);
  EXPECT_EQ(split[1].first, 27);
  EXPECT_EQ(split[1].last, 54);
}

// A single sequence is one micro-batch: it crosses both stages in turn while the other idles
// (the pipeline's bubble), so the step is the unsplit model's plus one hand-off.
TEST(PipelineParallel, ASingleSequenceWaitsForEveryStageAndTheHandOff) {
  const ModelShape model = five_layers();
  const std::vector<BatchEntry> one = decode_batch(1, 1000, 5);
  const double unsplit = static_cast<double>(pipelined(model, {}).iteration_cost(one).total);
  const IterationCost split = pipelined(model, {1, 2}).iteration_cost(one);
  const double link = within_node_hand_off_ns(model, 1);
  EXPECT_NEAR(static_cast<double>(split.total), unsplit + link, 1.0);
  EXPECT_NEAR(static_cast<double>(split.communication),
              link - static_cast<double>(h100().launch_overhead), 1.0);
}

// Two micro-batches cycle through the stages: each stage runs both per step, each micro-batch
// runs both stages and the hand-off. With stage 0 holding 3 layers against stage 1's 2 and a
// head, stage 0 is the busiest, and the step is twice its time: throughput is bound by the
// slowest stage, not by the trip.
TEST(PipelineParallel, ThroughputIsBoundByTheSlowestStage) {
  const ModelShape model = five_layers();
  for (const int sequences : {2, 8, 32}) {
    SCOPED_TRACE(sequences);
    const std::vector<BatchEntry> half = decode_batch(sequences / 2, 1000, 5);
    const double first = stage_ns(model, half, 0, 3, false);
    const double second = stage_ns(model, half, 3, 5, true);
    const double trip = first + second + within_node_hand_off_ns(model, sequences / 2);
    ASSERT_GT(first, second);
    ASSERT_GT(2 * first, trip);
    const IterationCost cost =
        pipelined(model, {1, 2}).iteration_cost(decode_batch(sequences, 1000, 5));
    EXPECT_NEAR(static_cast<double>(cost.total), 2 * first, 2.0);
    // The bound stage computes; nothing of the hand-off is on its path.
    EXPECT_EQ(cost.communication, 0);
    // Executed work is the unsplit model's, however it is scheduled.
    const IterationCost unsplit =
        pipelined(model, {}).iteration_cost(decode_batch(sequences, 1000, 5));
    EXPECT_NEAR(cost.flops, unsplit.flops, 1e-12 * unsplit.flops);
  }
}

// A token that exits in stage 0 leaves stage 1 nothing but its head: the busiest stage, and so the
// step, is stage 0's. batch_sync keeps the exited tokens riding to full depth: stage 1 works as
// if nobody exited, and that work is masked.
TEST(PipelineParallel, ExitsInAnEarlierStageFreeTheLaterOnesUnlessBatchSyncWaits) {
  const ModelShape model = five_layers();
  const std::vector<BatchEntry> exited = decode_batch(16, 1000, 2);
  const double first = stage_ns(model, decode_batch(8, 1000, 2), 0, 3, false);
  const double second = stage_ns(model, decode_batch(8, 1000, 2), 3, 5, true);
  const IterationCost early = pipelined(model, {1, 2}).iteration_cost(exited);
  EXPECT_NEAR(static_cast<double>(early.total), 2 * first, 2.0);
  EXPECT_LT(2 * second, first);  // stage 1 runs only the head for them

  std::vector<BatchEntry> riding = decode_batch(16, 1000, 5);
  for (BatchEntry& e : riding)
    e.useful_depth = 2;
  const IterationCost waited = pipelined(model, {1, 2}).iteration_cost(riding);
  const IterationCost full = pipelined(model, {1, 2}).iteration_cost(decode_batch(16, 1000, 5));
  EXPECT_EQ(waited.total, full.total);
  EXPECT_GT(waited.total, early.total);
  const double masked = pipelined(model, {}).iteration_cost(riding).masked_flops;
  EXPECT_NEAR(waited.masked_flops, masked, 1e-12 * masked);
  EXPECT_GT(waited.masked_flops, 0);
}

// Llama-3.1-70B at TP 8 x PP 2 spans two 8-GPU nodes: its one hand-off leaves the node over
// InfiniBand (50 GB/s at 0.72 of it, after 20 us on the H100 preset) instead of NVLink (450 GB/s at
// 0.78, after 8 us). One sequence waits for it.
TEST(PipelineParallel, AHandOffBetweenNodesTakesTheNetwork) {
  const ModelShape model = *find_model_preset("llama-3.1-70b");
  const std::vector<BatchEntry> one = decode_batch(1, 4000, 80);
  HardwareSpec big_node = h100();
  big_node.interconnect.gpus_per_node = 16;
  const double within =
      static_cast<double>(pipelined(model, {8, 2}, big_node).iteration_cost(one).total);
  const double across = static_cast<double>(pipelined(model, {8, 2}).iteration_cost(one).total);
  const Interconnect& link = h100().interconnect;
  ASSERT_GT(link.node_link_efficiency, 0);
  const double expected = hand_off_ns(model, 1, link.node_link_bandwidth, link.node_link_efficiency,
                                      static_cast<double>(link.node_link_latency)) -
                          within_node_hand_off_ns(model, 1);
  EXPECT_NEAR(across - within, expected, 2.0);
  EXPECT_TRUE(hand_off_crosses_nodes(0, {8, 2}, 8));
  EXPECT_FALSE(hand_off_crosses_nodes(0, {4, 2}, 8));
  EXPECT_TRUE(hand_off_crosses_nodes(1, {4, 4}, 8));
  EXPECT_FALSE(hand_off_crosses_nodes(2, {4, 4}, 8));
}

// Each stage holds its layers' weights and K/V: the stages' weights add up to the model's (the
// untied head on the last stage, the embedding on the first), and Llama-3.1-70B, which does not
// fit one H100 at all, fits two at PP 2, with the fuller stage binding.
TEST(PipelineParallel, EachStageHoldsItsLayersWeightsAndKv) {
  const ModelShape model = *find_model_preset("llama-3.1-70b");
  const TensorShard whole = TensorShard::of(model, 1);
  std::int64_t sum = 0;
  for (const PipelineStage& stage : split_pipeline(model.depth.full_depth(), 3))
    sum += whole.weight_bytes(model, stage);
  EXPECT_EQ(sum, model.weight_bytes());
  EXPECT_THROW(derive_kv_capacity(model, h100(), {16, 0, 0.1, 0, ParallelSpec{1, 1}}), InputError);
  const KvCapacity two = derive_kv_capacity(model, h100(), {16, 0, 0.1, 0, ParallelSpec{1, 2}});
  // 40 layers each; stage 0 has the embedding and stage 1 the head, the same size: stage 0 binds
  // (first of equals).
  const auto stages = split_pipeline(80, 2);
  const std::int64_t weights = whole.weight_bytes(model, stages[0]);
  const std::int64_t reserve = std::llround(0.1 * static_cast<double>(h100().memory_bytes));
  const std::int64_t per_token = 40 * model.kv_bytes_per_token_per_layer();
  EXPECT_EQ(two.weight_bytes, weights);
  EXPECT_EQ(two.kv_bytes_per_token, per_token);
  EXPECT_EQ(two.blocks, (h100().memory_bytes - weights - reserve) / (16 * per_token));
  // A tied embedding is copied onto the last stage.
  ModelShape tied = model;
  tied.tied_embeddings = true;
  const std::int64_t embedding = static_cast<std::int64_t>(tied.vocab) * tied.d_model * 2;
  EXPECT_EQ(whole.weight_bytes(tied, stages[1]) - whole.weight_bytes(model, stages[1]), 0);
  EXPECT_EQ(whole.weight_bytes(tied, stages[0]) + whole.weight_bytes(tied, stages[1]),
            tied.weight_bytes() + embedding);
}

// A recursive model's shared block sits on every stage that runs one of its recursions.
TEST(PipelineParallel, AStageHoldsTheSharedBlockLayersItRuns) {
  ModelShape model = test_support::llama_3_8b();
  model.depth = DepthStructure::middle_cycle(10, 2);  // 1 + 4 x 2 + 1: 10 executed, 6 unique
  const TensorShard whole = TensorShard::of(model, 1);
  const std::int64_t layer = model.layer_parameters() * 2;
  const std::vector<PipelineStage> stages = split_pipeline(10, 2);  // layers 0-4 and 5-9
  // Stage 0: the prelude and block layers 0-3; stage 1: block layers 0-3 again and the coda.
  const std::int64_t embedding = static_cast<std::int64_t>(model.vocab) * model.d_model * 2;
  EXPECT_EQ(whole.weight_bytes(model, stages[0]), 5 * layer + embedding);
  EXPECT_EQ(whole.weight_bytes(model, stages[1]),
            5 * layer + embedding + model.d_model * 2);  // the head and the final norm
}

TEST(PipelineParallel, SplitsTheModelAndNodesCannotTakeAreRefusedNamingTheKey) {
  const ModelShape model = five_layers();
  const auto error = [&](ParallelSpec parallel, const HardwareSpec& hardware) {
    try {
      pipelined(model, parallel, hardware);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({1, 6}, h100()),
            "parallel.pipeline: expected at most the 5 layers llama-3-8b executes (a stage holds "
            "at least one), found 6");
  HardwareSpec six = h100();
  six.interconnect.gpus_per_node = 6;
  EXPECT_EQ(error({4, 2}, six),
            "parallel.tensor: expected a divisor of the 6 GPUs of a h100-sxm node when a replica "
            "spans nodes (8 GPUs), so that no TP group straddles two nodes, found 4");
  HardwareSpec alone = h100();
  alone.interconnect.node_link_bandwidth = 0;
  EXPECT_EQ(error({8, 2}, alone),
            "hardware.node_link_bandwidth_gbps: expected a positive bandwidth between nodes: a "
            "replica of 16 GPUs spans 8-GPU nodes, found 0");
  EXPECT_EQ(error({4, 2}, alone), "no error");  // one node: no network needed
  HardwareSpec unlinked = h100();
  unlinked.interconnect.link_bandwidth = 0;
  EXPECT_EQ(error({1, 2}, unlinked),
            "hardware.link_bandwidth_gbps: expected a positive link bandwidth for "
            "parallel.tensor 1 and parallel.pipeline 2, found 0");
}

}  // namespace
}  // namespace exitsim::sim
