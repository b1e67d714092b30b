// The decode pass's exit decisions, taken while the layers run: the shared exit policy reads each
// token's scores known so far (router scores at the start of a recursion, confidences at an exit
// point) and a token leaves at the exit point the policy chose. Draw-based policies decide before
// the pass (decide_upfront); the oracle only records each exit point's prediction, and its exit
// is found at emission.
#include "decode_batch.hpp"

namespace exitsim::engine {

void Engine::Loop::decide_before_layer(DecodeBatch& b, int layer) {
  const DepthStructure& depth = model_.depth();
  const int recursion = model_.source_of(layer).recursion;
  const bool recursion_starts =
      recursion >= 1 && (layer - depth.prelude_layers) % depth.block_layers == 0;
  if (!recursion_starts || !b.any_running())
    return;
  const auto points = exit_depths_.size();
  if (feed_ == ExitFeed::token_choice && recursion == 1) {
    // Token choice: every recursion's router scores the token once, before the block runs.
    for (int r = 1; r <= depth.recursions; ++r) {
      const std::vector<double> s = route(r, b.running_states.slots());
      for (std::size_t i = 0; i < b.size(); ++i)
        b.scores[i * points + static_cast<std::size_t>(r - 1)] = s[i];
    }
    call_exit_policy(b.seqs, b.score_spans, false, b.chosen);
    for (std::size_t i = 0; i < b.size(); ++i) {
      b.exits[i] = b.chosen[i];
      b.decided_score[i] = b.scores[i * points + static_cast<std::size_t>(b.chosen[i])];
    }
  }
  if (feed_ == ExitFeed::expert_choice) {
    // Expert choice: this recursion's router decides which running tokens go on into it.
    const std::vector<double> s = route(recursion, b.running_states.slots());
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b.running(i))
        b.scores[i * points + static_cast<std::size_t>(recursion - 1)] = s[i];
    }
    call_exit_policy(b.seqs, b.score_spans, false, b.chosen);
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b.running(i) && b.chosen[i] < recursion - 1) {
        b.leave(i, b.chosen[i], exit_depths_[static_cast<std::size_t>(b.chosen[i])], s[i]);
      }
    }
  }
}

void Engine::Loop::decide_after_layer(DecodeBatch& b, int layer) {
  const int point = point_at_depth(layer + 1);
  const int last_point = static_cast<int>(exit_depths_.size()) - 1;
  if (point < 0 || point >= last_point || !b.any_running())
    return;
  if (feed_ == ExitFeed::upfront || feed_ == ExitFeed::token_choice) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b.running(i) && b.exits[i] == point)
        b.leave(i, point, layer + 1, b.decided_score[i]);
    }
  } else if (feed_ == ExitFeed::confidence || feed_ == ExitFeed::oracle) {
    probe_exit_point(b, point);
  }
}

void Engine::Loop::probe_exit_point(DecodeBatch& b, int point) {
  std::vector<std::size_t> probed;
  std::vector<StateSlot> probe_slots;
  std::vector<Sequence*> probe_seqs;
  std::vector<std::int32_t> probe_positions;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (!b.running(i))
      continue;
    probed.push_back(i);
    probe_slots.push_back(b.running_states[i]);
    probe_seqs.push_back(b.seqs[i]);
    probe_positions.push_back(b.positions[i]);
  }
  const bool observed = static_cast<bool>(options_.observer.on_probe);
  const HeadOutput probe = head(probe_slots, probe_seqs, probe_positions, true,
                                {.probabilities = feed_ == ExitFeed::confidence || observed});
  const auto points = exit_depths_.size();
  const auto at = [&](std::size_t i) { return i * points + static_cast<std::size_t>(point); };
  for (std::size_t k = 0; k < probed.size(); ++k) {
    const Top2Confidence& top = probe.top[k];
    b.argmax_at[at(probed[k])] = static_cast<std::int32_t>(top.top1_index);
    if (feed_ == ExitFeed::confidence)
      b.scores[at(probed[k])] = confidence_of(top);
    if (observed) {
      const Sequence& s = *b.seqs[probed[k]];
      options_.observer.on_probe(s.request->id, s.output_position(), point, top.top1_prob,
                                 top.margin, static_cast<std::int32_t>(top.top1_index));
    }
  }
  if (feed_ != ExitFeed::confidence)
    return;
  call_exit_policy(b.seqs, b.score_spans, false, b.chosen);
  for (const std::size_t i : probed) {
    if (b.chosen[i] <= point)
      b.leave(i, point, exit_depths_[static_cast<std::size_t>(point)], b.scores[at(i)]);
  }
}

}  // namespace exitsim::engine
