// Continuous depth-wise batching (policy/depthwise.hpp): one call of the shared block per step
// over every in-flight token at its own recursion. Tokens entering run the prelude first; a token
// that leaves the block runs the coda and the head when the shared rule says so. K/V as under
// skip_kv: a recursion's stream holds only the tokens that reached it.
#include <limits>

#include "exitsim/traces/engine_ops.hpp"
#include "loop.hpp"

namespace exitsim::engine {
namespace {

constexpr double k_unknown = -std::numeric_limits<double>::infinity();

// In-flight tokens' scores so far, as the exit policy reads them.
std::vector<std::span<const double>> flight_scores_of(std::span<Sequence* const> seqs) {
  std::vector<std::span<const double>> scores;
  for (const Sequence* s : seqs)
    scores.emplace_back(s->flight_scores);
  return scores;
}

}  // namespace

void Engine::Loop::decide_in_flight(std::span<Sequence* const> in_block,
                                    std::span<const int> recursion_of,
                                    std::span<const std::size_t> deciding,
                                    std::span<std::uint8_t> leaves) {
  std::vector<Sequence*> seqs;
  std::vector<StateSlot> states;
  std::vector<std::int32_t> positions;
  for (std::size_t k = 0; k < deciding.size(); ++k) {
    Sequence* s = in_block[deciding[k]];
    seqs.push_back(s);
    states.push_back(s->flight[0]);
    positions.push_back(static_cast<std::int32_t>(s->tokens.size() - 1));
  }
  const int prelude = model_.depth().prelude_layers;
  const int block = model_.depth().block_layers;
  if (feed_ == ExitFeed::confidence) {
    const HeadOutput probe = head(states, seqs, positions, true, {.probabilities = true});
    for (std::size_t k = 0; k < deciding.size(); ++k) {
      const int point = point_at_depth(prelude + recursion_of[deciding[k]] * block);
      seqs[k]->flight_scores[static_cast<std::size_t>(point)] = confidence_of(probe.top[k]);
    }
  } else {
    // Expert choice: the router of the next recursion decides whether the token runs it.
    for (std::size_t k = 0; k < deciding.size(); ++k) {
      const int next = recursion_of[deciding[k]] + 1;
      seqs[k]->flight_scores[static_cast<std::size_t>(next - 1)] =
          route(next, std::span<const StateSlot>(&states[k], 1))[0];
    }
  }
  std::vector<int> chosen(seqs.size());
  call_exit_policy(seqs, flight_scores_of(seqs), false, chosen);
  for (std::size_t k = 0; k < deciding.size(); ++k) {
    const int r = recursion_of[deciding[k]];
    const int point = point_at_depth(prelude + r * block);
    const bool exits = feed_ == ExitFeed::confidence ? chosen[k] <= point : chosen[k] < r;
    if (!exits)
      continue;
    leaves[deciding[k]] = 1;
    seqs[k]->flight_exit = point;
    const std::size_t decisive = feed_ == ExitFeed::confidence ? static_cast<std::size_t>(point)
                                                               : static_cast<std::size_t>(r);
    seqs[k]->flight_score = seqs[k]->flight_scores[decisive];
  }
}

void Engine::Loop::depthwise_pass(std::span<Sequence* const> seqs) {
  const DepthStructure& depth = model_.depth();
  const int prelude = depth.prelude_layers;
  const int block = depth.block_layers;
  const std::size_t points = exit_depths_.size();
  const int last_point = static_cast<int>(points) - 1;

  std::vector<Sequence*> entering;
  std::vector<std::int32_t> entering_tokens, entering_positions;
  for (Sequence* s : seqs) {
    if (s->stage.next_recursion() == 1) {
      entering.push_back(s);
      entering_tokens.push_back(s->tokens.back());
      entering_positions.push_back(static_cast<std::int32_t>(s->tokens.size() - 1));
    }
  }
  if (!entering.empty()) {
    std::vector<StateSlot> x;
    for (Sequence* s : entering) {
      if (s->flight.empty())
        s->flight = HeldStates(*states_, 1);
      x.push_back(s->flight[0]);
    }
    {
      auto timed = span(traces::engine_ops::embed, traces::OpKind::other,
                        static_cast<std::int64_t>(entering.size()), -1);
      model_.embed(entering_tokens, *states_, x);
    }
    std::vector<LayerRow> rows(entering.size());
    for (int layer = 0; layer < prelude; ++layer) {
      for (std::size_t i = 0; i < entering.size(); ++i)
        rows[i] = row_for(*entering[i], layer, entering_positions[i]);
      run_layer(layer, x, rows);
    }
    std::vector<int> exits(entering.size(), -1);
    if (feed_ == ExitFeed::upfront)
      decide_upfront(entering, exits);
    for (std::size_t i = 0; i < entering.size(); ++i) {
      Sequence& s = *entering[i];
      s.flight_exit = exits[i];
      s.flight_score = std::numeric_limits<double>::quiet_NaN();
      s.flight_scores.assign(points, k_unknown);
    }
    if (feed_ == ExitFeed::token_choice || feed_ == ExitFeed::expert_choice) {
      const int routers = feed_ == ExitFeed::token_choice ? depth.recursions : 1;
      for (int r = 1; r <= routers; ++r) {
        const std::vector<double> s = route(r, x);
        for (std::size_t i = 0; i < entering.size(); ++i)
          entering[i]->flight_scores[static_cast<std::size_t>(r - 1)] = s[i];
      }
    }
    if (feed_ == ExitFeed::token_choice) {
      std::vector<int> chosen(entering.size());
      call_exit_policy(entering, flight_scores_of(entering), false, chosen);
      for (std::size_t i = 0; i < entering.size(); ++i) {
        entering[i]->flight_exit = chosen[i];
        entering[i]->flight_score = entering[i]->flight_scores[static_cast<std::size_t>(chosen[i])];
      }
    }
  }

  // The shared block, once, over every token not waiting for its head.
  std::vector<Sequence*> in_block;
  std::vector<int> recursion_of;
  for (Sequence* s : seqs) {
    if (s->stage.next_recursion() >= 1) {
      in_block.push_back(s);
      recursion_of.push_back(s->stage.next_recursion());
    }
  }
  std::vector<StateSlot> block_states;
  for (const Sequence* s : in_block)
    block_states.push_back(s->flight[0]);
  std::vector<LayerRow> rows(in_block.size());
  for (int j = 0; j < block; ++j) {
    for (std::size_t i = 0; i < in_block.size(); ++i) {
      const int layer = prelude + (recursion_of[i] - 1) * block + j;
      rows[i] =
          row_for(*in_block[i], layer, static_cast<std::int32_t>(in_block[i]->tokens.size() - 1));
      rows[i].recursion = recursion_of[i];
    }
    run_layer(prelude + j, block_states, rows);
  }

  // Who leaves the block: at the last recursion everyone; at an exit point, as the policy says.
  std::vector<std::uint8_t> leaves(in_block.size(), 0);
  std::vector<std::size_t> deciding;  // in_block indices at an exit point the policy decides
  for (std::size_t i = 0; i < in_block.size(); ++i) {
    Sequence& s = *in_block[i];
    const int r = recursion_of[i];
    const int point = point_at_depth(prelude + r * block);
    if (r == depth.recursions) {
      leaves[i] = 1;
      s.flight_exit = last_point;
    } else if (point >= 0 && (feed_ == ExitFeed::upfront || feed_ == ExitFeed::token_choice)) {
      leaves[i] = s.flight_exit == point ? 1 : 0;
    } else if (point >= 0) {
      deciding.push_back(i);
    }
  }
  if (!deciding.empty())
    decide_in_flight(in_block, recursion_of, deciding, leaves);

  std::vector<policy::DepthwiseStage> stages(seqs.size());
  std::vector<std::uint8_t> left(seqs.size(), 0), runs_head(seqs.size(), 0);
  for (std::size_t k = 0, i = 0; k < seqs.size(); ++k) {
    stages[k] = seqs[k]->stage;
    if (i < in_block.size() && in_block[i] == seqs[k])
      left[k] = leaves[i++];
  }
  policy::finish_depthwise_step(options_.depthwise, stages, left, runs_head);

  std::vector<Sequence*> heads;
  std::vector<std::int32_t> head_positions;
  for (std::size_t k = 0; k < seqs.size(); ++k) {
    seqs[k]->stage = stages[k];
    if (runs_head[k] != 0) {
      heads.push_back(seqs[k]);
      head_positions.push_back(static_cast<std::int32_t>(seqs[k]->tokens.size() - 1));
    }
  }
  if (heads.empty())
    return;
  std::vector<StateSlot> states;
  for (const Sequence* s : heads)
    states.push_back(s->flight[0]);
  const HeadOutput out = head(states, heads, head_positions, false, emission_wants());
  auto timed = span(traces::engine_ops::sampling, traces::OpKind::sampling,
                    static_cast<std::int64_t>(heads.size()), -1);
  for (std::size_t i = 0; i < heads.size(); ++i) {
    Sequence& s = *heads[i];
    count_exit(s, s.flight_exit);
    emit(s, sample(s, out, i), s.flight_exit, s.flight_score, out.logits_of(i));
    s.flight_exit = -1;
  }
}

}  // namespace exitsim::engine
