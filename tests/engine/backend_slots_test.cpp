// The Backend's slot interface (hidden_states.hpp) on the CPU: layer calls over states scattered
// through the store — reversed, interleaved with slots held elsewhere — compute what the
// reference forward pass computes, and the top-2 head agrees with the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
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

  const std::unique_ptr<HiddenStates> states = model.make_states();
  const HeldStates spacer(*states, 3);
  const HeldStates x(*states, n);
  const std::vector<StateSlot> reversed(x.slots().rbegin(), x.slots().rend());
  const std::vector<std::int32_t> reversed_tokens(tokens.rbegin(), tokens.rend());
  model.embed(reversed_tokens, *states, reversed);
  // One K/V stream per executed layer, each holding all n rows.
  const auto blocks_per_stream = static_cast<std::int64_t>((n + 3) / 4);
  KvCache kv(model.kv_width(), 4, model.executed_layers() * blocks_per_stream);
  for (int layer = 0; layer < model.executed_layers(); ++layer) {
    const int stream = kv.open_stream();
    std::vector<LayerRow> rows(n);
    for (std::size_t t = 0; t < n; ++t) {
      rows[t] = {.position = static_cast<std::int32_t>(t),
                 .read_stream = stream,
                 .write_stream = stream,
                 .chunk = 0};
    }
    model.layer(layer, *states, x.slots(), rows, kv);
  }
  const Matrix got = model.logits(*states, x.slots());
  const Matrix want = reference_forward(config, weights, tokens).logits;
  ASSERT_EQ(got.rows(), want.rows());
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, want.cwiseAbs().maxCoeff()));

  const std::vector<Top2Confidence> top = model.top2(*states, x.slots(), true);
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
