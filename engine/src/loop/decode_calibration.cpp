// adaptive_threshold's calibration pairs, as FREE collects them at each synchronized parallel
// decoding event (a deferred_fill pass whose pending states reach the top): for every completed
// state, whether the prediction it made at its exit point equals its full-depth prediction, then
// for the deep token that carried them, whether its prediction at each exit point below the top
// equals its own full-depth prediction. The shared executor rule (docs/exit_policies.md,
// "adaptive_threshold") fixes the order: batch row order, the states oldest first, then the deep
// token's exit points from the shallowest; the simulator adds its pairs in the same order.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "decode_batch.hpp"

namespace exitsim::engine {

void Engine::Loop::collect_state_pairs(DecodeBatch& b, std::size_t i,
                                       std::span<const PendingState> filled,
                                       const HeadOutput& deep) const {
  for (std::size_t k = 0; k < filled.size(); ++k) {
    const PendingState& state = filled[k];
    if (state.exit_point < 0) {
      throw std::logic_error(
          fmt::format("engine step {}: the pending state of position {} has no exit prediction",
                      step_, state.position));
    }
    const auto deep_prediction = static_cast<std::int32_t>(deep.top[k].top1_index);
    b.state_pairs[i].push_back(
        {state.confidence, state.exit_argmax == deep_prediction, state.token_index});
  }
}

void Engine::Loop::add_calibration_pairs(const DecodeBatch& b, std::size_t i,
                                         std::int32_t deep_prediction, GeneratedToken* deep_token) {
  if (!b.ran[i].fills_complete)
    return;  // no parallel pass reached the top with this token: FREE learns nothing from it
  for (const StatePair& pair : b.state_pairs[i]) {
    estimator_->add_pair(pair.confidence, pair.agrees);
    result_.tokens[pair.token_index].agreements.push_back(pair.agrees ? 1 : 0);
    ++result_.calibration_pairs;
  }
  const std::size_t points = exit_depths_.size();
  for (std::size_t p = 0; p + 1 < points; ++p) {
    const bool agrees = b.argmax_at[i * points + p] == deep_prediction;
    estimator_->add_pair(b.scores[i * points + p], agrees);
    if (deep_token != nullptr)
      deep_token->agreements.push_back(agrees ? 1 : 0);
    ++result_.calibration_pairs;
  }
}

void Engine::Loop::record_exit_calibration(const DecodeBatch& b, std::size_t i) {
  const std::size_t points = exit_depths_.size();
  const auto exit_point = static_cast<std::size_t>(b.exits[i]);
  // Probed at every point up to its exit (a deep token: every point below the top).
  const std::size_t probed = std::min(exit_point + 1, points - 1);
  GeneratedToken& token = result_.tokens.back();
  token.confidences.assign(b.scores.begin() + static_cast<std::ptrdiff_t>(i * points),
                           b.scores.begin() + static_cast<std::ptrdiff_t>(i * points + probed));
  if (!b.ran[i].exit_state_waits)
    return;
  PendingState& state = b.seqs[i]->pending.back();
  state.exit_point = b.exits[i];
  state.confidence = b.scores[i * points + exit_point];
  state.exit_argmax = b.argmax_at[i * points + exit_point];
  state.token_index = result_.tokens.size() - 1;
}

}  // namespace exitsim::engine
