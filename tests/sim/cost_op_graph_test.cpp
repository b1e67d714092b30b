#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "exitsim/core/presets.hpp"
#include "exitsim/sim/cost/op_graph.hpp"
#include "exitsim/sim/cost/roofline.hpp"

namespace exitsim::sim {
namespace {

struct Eval {
  PathEnd end;
  std::vector<int> path;  // sink first
};

Eval evaluate(const OpGraph& g, const std::vector<double>& duration) {
  std::vector<double> finish(duration.size());
  std::vector<int> via(duration.size());
  Eval e;
  e.end = g.longest_path(duration, finish, via);
  for (int v = e.end.sink; v >= 0; v = via[static_cast<std::size_t>(v)])
    e.path.push_back(v);
  return e;
}

std::vector<std::size_t> positions(const OpGraph& g) {
  std::vector<std::size_t> pos(static_cast<std::size_t>(g.size()));
  for (std::size_t i = 0; i < g.topological_order().size(); ++i) {
    pos[static_cast<std::size_t>(g.topological_order()[i])] = i;
  }
  return pos;
}

// a -> b -> d and a -> c -> d, with c on a second stream so it can overlap b.
OpGraph diamond(int c_stream) {
  OpGraph g;
  const int a = g.add_op(OpKind::qkv_projection, 0);
  const int b = g.add_op(OpKind::attention_prefill, 0);
  const int c = g.add_op(OpKind::attention_decode, c_stream);
  const int d = g.add_op(OpKind::output_projection, 0);
  g.add_dependency(a, b);
  g.add_dependency(a, c);
  g.add_dependency(b, d);
  g.add_dependency(c, d);
  g.finalize();
  return g;
}

TEST(CostOpGraph, TopologicalOrderRespectsEveryEdge) {
  const OpGraph g = diamond(1);
  ASSERT_EQ(g.topological_order().size(), 4u);
  const auto pos = positions(g);
  for (const auto& [before, after] : g.edges()) {
    EXPECT_LT(pos[static_cast<std::size_t>(before)], pos[static_cast<std::size_t>(after)]);
  }
}

TEST(CostOpGraph, LongestPathTakesTheSlowerBranchOfTwoStreams) {
  const OpGraph g = diamond(1);
  const Eval slow_b = evaluate(g, {1, 5, 3, 2});
  EXPECT_DOUBLE_EQ(slow_b.end.length, 8);
  EXPECT_EQ(slow_b.path, (std::vector<int>{3, 1, 0}));
  const Eval slow_c = evaluate(g, {1, 5, 7, 2});
  EXPECT_DOUBLE_EQ(slow_c.end.length, 10);
  EXPECT_EQ(slow_c.path, (std::vector<int>{3, 2, 0}));
}

TEST(CostOpGraph, OneStreamSerialisesIndependentBranches) {
  const OpGraph g = diamond(0);
  const Eval e = evaluate(g, {1, 5, 3, 2});
  EXPECT_DOUBLE_EQ(e.end.length, 1 + 5 + 3 + 2);
  EXPECT_EQ(e.path.size(), 4u);
}

TEST(CostOpGraph, IndependentOpsOnTwoStreamsOverlap) {
  OpGraph g;
  g.add_op(OpKind::mlp_down, 0);
  g.add_op(OpKind::mlp_down, 1);
  g.add_op(OpKind::mlp_down, 1);
  g.finalize();
  // Stream 1 runs its two ops back to back; stream 0 runs alongside.
  const Eval e = evaluate(g, {4, 2, 3});
  EXPECT_DOUBLE_EQ(e.end.length, 5);
  EXPECT_EQ(e.path, (std::vector<int>{2, 1}));
}

TEST(CostOpGraph, ZeroDurationOpsDoNotLengthenThePath) {
  const OpGraph g = diamond(0);
  EXPECT_DOUBLE_EQ(evaluate(g, {1, 0, 0, 2}).end.length, 3);
  EXPECT_DOUBLE_EQ(evaluate(g, {0, 0, 0, 0}).end.length, 0);
}

TEST(CostOpGraph, DependencyAgainstStreamOrderIsACycle) {
  OpGraph g;
  const int first = g.add_op(OpKind::input_norm, 0);
  const int second = g.add_op(OpKind::qkv_projection, 0);
  g.add_dependency(second, first);  // the stream runs `first` before `second`
  EXPECT_THROW(g.finalize(), std::logic_error);
}

TEST(CostOpGraph, BadIdsAndLateEditsAreRejected) {
  OpGraph g;
  const int a = g.add_op(OpKind::input_norm);
  EXPECT_THROW(g.add_dependency(a, a), std::logic_error);
  EXPECT_THROW(g.add_dependency(a, 7), std::logic_error);
  g.finalize();
  EXPECT_THROW(g.add_op(OpKind::sampling), std::logic_error);
}

const RooflineCostModel& llama_on_h100() {
  static const RooflineCostModel model(*find_model_preset("llama-3-8b"),
                                       *find_hardware_preset("h100-sxm"), {0.7, 0.85});
  return model;
}

TEST(CostOpGraph, SingleStreamAndChainsAreDetected) {
  EXPECT_TRUE(diamond(0).single_stream());
  EXPECT_FALSE(diamond(1).single_stream());
  // A diamond's two middle ops on one stream are chained by its order; on two, they are not.
  EXPECT_TRUE(diamond(0).chain());
  EXPECT_FALSE(diamond(1).chain());
  const RooflineCostModel tp(*find_model_preset("llama-3-8b"), *find_hardware_preset("h100-sxm"),
                             {0.7, 0.85}, ParallelSpec{2});
  EXPECT_FALSE(tp.layer_graph().single_stream());
  EXPECT_TRUE(tp.layer_graph().chain());
  EXPECT_TRUE(llama_on_h100().layer_graph().single_stream());
  EXPECT_TRUE(llama_on_h100().head_graph().single_stream());
  OpGraph empty;
  empty.finalize();
  EXPECT_FALSE(empty.single_stream());
}

// Why the roofline model may price a chain graph as the sum of its ops' durations
// (RooflineCostModel::walk_graph), for a single-stream graph and for a tensor-parallel layer that
// hands over to its all-reduces on stream 1: with non-negative durations, each of which moves the
// running end or is zero, the longest path is the running sum in topological order, bit for bit,
// and the walk back from its sink passes every op of non-zero duration. (The model itself sums
// in its own order, the layer's token-only ops first, which differs from this sum only by
// rounding; CostSyncReference holds its totals to the per-op reference.)
TEST(CostOpGraph, ChainPathMatchesTheWalk) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> length(0.0, 5000.0);
  std::uniform_int_distribution<int> percent(1, 100);
  const RooflineCostModel tp(*find_model_preset("llama-3-8b"), *find_hardware_preset("h100-sxm"),
                             {0.7, 0.85}, ParallelSpec{4});
  const std::vector<OpGraph> graphs = {llama_on_h100().layer_graph(), llama_on_h100().head_graph(),
                                       tp.layer_graph(), tp.head_graph()};
  for (const OpGraph& g : graphs) {
    ASSERT_TRUE(g.chain());
    const auto n = static_cast<std::size_t>(g.size());
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<double> duration(n);
      for (double& d : duration)
        d = percent(rng) <= 30 ? 0.0 : length(rng);
      double end = 0;
      bool chain = true;
      for (const int v : g.topological_order()) {
        const double d = duration[static_cast<std::size_t>(v)];
        const double next = end + d;
        chain = chain && d >= 0 && (d == 0 || next > end);
        end = next;
      }
      ASSERT_TRUE(chain);
      const Eval e = evaluate(g, duration);
      if (end > 0) {
        EXPECT_EQ(e.end.length, end);
      } else {
        EXPECT_EQ(e.end.length, 0.0);
      }
      double walk = 0;
      for (const int v : e.path)
        walk += duration[static_cast<std::size_t>(v)];
      double reverse = 0;
      for (std::size_t i = n; i-- > 0;)
        reverse += duration[static_cast<std::size_t>(g.topological_order()[i])];
      EXPECT_EQ(walk, reverse);
      for (std::size_t v = 0; v < n; ++v) {
        if (duration[v] > 0) {
          EXPECT_NE(std::find(e.path.begin(), e.path.end(), static_cast<int>(v)), e.path.end());
        }
      }
    }
  }
}

TEST(CostOpGraph, KindsHaveNames) {
  EXPECT_EQ(to_string(OpKind::attention_decode), "attention_decode");
  EXPECT_EQ(to_string(OpKind::lm_head), "lm_head");
}

}  // namespace
}  // namespace exitsim::sim
