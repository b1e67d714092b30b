// The Backend's slot interface (hidden_states.hpp) on the CPU: layer calls over states scattered
// through the store — reversed, interleaved with slots held elsewhere — compute what the
// reference forward pass computes, and the top-2 head agrees with the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "support/layer_calls.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

using test_support::reference_forward;
using test_support::small_config;
using test_support::small_recursive_depth;
using test_support::small_weights;

TEST(BackendSlots, LayerCallsOnScatteredSlotsMatchTheReferenceForwardPass) {
  const ModelConfig config = small_config(small_recursive_depth());
  const ModelWeights weights = small_weights(config);
  const CpuModel model(config, weights);
  const std::vector<std::int32_t> tokens{3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3};
  const std::size_t n = tokens.size();
  const test_support::LayerCallRun run = test_support::run_layer_calls(model, tokens);
  const Matrix got = model.logits(*run.states, run.x.slots());
  const Matrix want = reference_forward(config, weights, tokens).logits;
  ASSERT_EQ(got.rows(), want.rows());
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, want.cwiseAbs().maxCoeff()));

  const std::vector<Top2Confidence> top = model.top2(*run.states, run.x.slots(), true);
  ASSERT_EQ(top.size(), n);
  for (std::size_t t = 0; t < n; ++t) {
    const Top2Confidence from_logits = top2_confidence(
        {got.row(static_cast<Eigen::Index>(t)).data(), static_cast<std::size_t>(got.cols())});
    EXPECT_EQ(top[t].top1_index, from_logits.top1_index);
    EXPECT_FLOAT_EQ(top[t].top1_prob, from_logits.top1_prob);
  }
}

}  // namespace
}  // namespace exitsim::engine
