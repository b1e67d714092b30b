// Prompts (and sequences recomputed after preemption) run every layer: their K/V is needed by
// every later token at every depth, whatever the strategy.
#include <limits>

#include "exitsim/traces/engine_ops.hpp"
#include "loop.hpp"

namespace exitsim::engine {

void Engine::Loop::prefill_pass(std::span<Sequence* const> sequences,
                                std::span<const std::int64_t> starts,
                                std::span<const std::int64_t> chunks) {
  std::vector<std::int32_t> tokens;
  std::vector<const Sequence*> owner;
  std::vector<int> chunk_of;
  std::vector<std::int32_t> positions;
  for (std::size_t k = 0; k < sequences.size(); ++k) {
    for (std::int64_t t = starts[k]; t < starts[k] + chunks[k]; ++t) {
      tokens.push_back(sequences[k]->tokens[static_cast<std::size_t>(t)]);
      owner.push_back(sequences[k]);
      chunk_of.push_back(static_cast<int>(k));
      positions.push_back(static_cast<std::int32_t>(t));
    }
  }
  const HeldStates x(*states_, tokens.size());
  {
    auto timed = span(traces::engine_ops::embed, traces::OpKind::other,
                      static_cast<std::int64_t>(tokens.size()), -1);
    model_.embed(tokens, *states_, x.slots());
  }
  std::vector<LayerRow> rows(tokens.size());
  for (int layer = 0; layer < model_.depth().stacked_depth(); ++layer) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      rows[r] = row_for(*owner[r], layer, positions[r]);
      rows[r].chunk = chunk_of[r];
    }
    run_layer(layer, x.slots(), rows);
  }
  // Every prompt token runs the coda (later tokens attend to its K/V there); only the last token
  // of a completed prompt goes on to the head.
  const int first_coda = model_.depth().stacked_depth();
  for (int c = 0; c < model_.depth().coda_layers; ++c) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      rows[r] = row_for(*owner[r], first_coda + c, positions[r]);
      rows[r].chunk = chunk_of[r];
    }
    run_layer(first_coda + c, x.slots(), rows);
  }
  std::vector<StateSlot> last_rows;
  std::vector<Sequence*> emitting;
  std::size_t offset = 0;
  for (std::size_t k = 0; k < sequences.size(); ++k) {
    offset += static_cast<std::size_t>(chunks[k]);
    const bool completes =
        starts[k] + chunks[k] == static_cast<std::int64_t>(sequences[k]->tokens.size());
    if (completes) {
      last_rows.push_back(x[offset - 1]);
      emitting.push_back(sequences[k]);
    }
  }
  if (emitting.empty())
    return;
  const HeadOutput out = lm_head(last_rows, traces::engine_ops::lm_head, emission_wants());
  const int full = static_cast<int>(exit_depths_.size()) - 1;
  auto timed = span(traces::engine_ops::sampling, traces::OpKind::sampling,
                    static_cast<std::int64_t>(emitting.size()), -1);
  for (std::size_t i = 0; i < emitting.size(); ++i) {
    emit(*emitting[i], sample(*emitting[i], out, i), full, std::numeric_limits<double>::quiet_NaN(),
         out.logits_of(i));
  }
}

}  // namespace exitsim::engine
