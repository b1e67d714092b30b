// The shipped tiny model through the C++ engine against what PyTorch computed at training time
// (models/tiny-recursive/parity.safetensors, written by training/train_tiny.py from the exported
// weights): logits at every exit and router scores, within 1e-4.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/model_weights.hpp"
#include "exitsim/engine/safetensors.hpp"

namespace exitsim::engine {
namespace {

namespace fs = std::filesystem;

const fs::path k_model_dir = fs::path(EXITSIM_SOURCE_DIR) / "models" / "tiny-recursive";

TEST(TinyModelParity, ExitLogitsAndRouterScoresMatchTraining) {
  if (!fs::exists(k_model_dir / "parity.safetensors"))
    GTEST_SKIP() << "no shipped model at " << k_model_dir << " (train it: training/train_tiny.py)";
  const ModelConfig config = load_model_config(k_model_dir);
  const ModelWeights weights = load_model_weights(config);
  const CpuModel model(config, weights);
  SafetensorsFile fixture = SafetensorsFile::open(k_model_dir / "parity.safetensors");
  const std::vector<float> token_values = fixture.read_floats("tokens");
  const auto n = static_cast<std::int64_t>(token_values.size());
  std::vector<std::int32_t> tokens;
  for (const float t : token_values)
    tokens.push_back(static_cast<std::int32_t>(t));
  const DepthStructure& depth = config.shape.depth;
  const std::int64_t vocab = config.shape.vocab;
  const std::vector<float> logits = fixture.read_floats("logits");
  const std::vector<float> routers = fixture.read_floats("router_scores");
  ASSERT_EQ(static_cast<std::int64_t>(logits.size()), depth.recursions * n * vocab);

  // Every executed layer gets its own stream; each exit runs the coda on fresh streams, as the
  // training graph does (every token at that exit).
  KvCache kv(model.kv_width(), 16, 4 * (model.executed_layers() + depth.recursions));
  const auto rows_at = [&](int stream) {
    std::vector<LayerRow> rows(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
      rows[static_cast<std::size_t>(t)] = {
          static_cast<std::int32_t>(t), stream, stream, false, -1, 0};
    }
    return rows;
  };
  const std::unique_ptr<HiddenStates> states = model.make_states();
  const HeldStates x(*states, tokens.size());
  model.embed(tokens, *states, x.slots());
  for (int layer = 0; layer < depth.prelude_layers; ++layer)
    model.layer(layer, *states, x.slots(), rows_at(kv.open_stream()), kv);
  double worst_logit = 0;
  double worst_router = 0;
  for (int r = 1; r <= depth.recursions; ++r) {
    const std::vector<double> scores = model.router_scores(r, *states, x.slots());
    for (std::int64_t t = 0; t < n; ++t) {
      worst_router = std::max(worst_router,
                              std::abs(scores[static_cast<std::size_t>(t)] -
                                       double{routers[static_cast<std::size_t>((r - 1) * n + t)]}));
    }
    for (int j = 0; j < depth.block_layers; ++j) {
      const int layer = depth.prelude_layers + (r - 1) * depth.block_layers + j;
      model.layer(layer, *states, x.slots(), rows_at(kv.open_stream()), kv);
    }
    const HeldStates y(*states, tokens.size());
    states->copy(x.slots(), y.slots());
    for (int c = 0; c < depth.coda_layers; ++c)
      model.layer(depth.stacked_depth() + c, *states, y.slots(), rows_at(kv.open_stream()), kv);
    const Matrix got = model.logits(*states, y.slots());
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t v = 0; v < vocab; ++v) {
        const float want = logits[static_cast<std::size_t>(((r - 1) * n + t) * vocab + v)];
        worst_logit = std::max(worst_logit, std::abs(double{got(t, v)} - double{want}));
      }
    }
  }
  RecordProperty("worst_logit", std::to_string(worst_logit));
  RecordProperty("worst_router", std::to_string(worst_router));
  EXPECT_LT(worst_logit, 1e-4);
  EXPECT_LT(worst_router, 1e-4);
}

}  // namespace
}  // namespace exitsim::engine
