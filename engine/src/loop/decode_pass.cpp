// One decode token per sequence through the stack, each leaving at its own exit point. Before
// each layer the pass asks the shared plan of the exits known so far (policy::plan_so_far) what
// the layer does with each token: run its row (masked or not, with the pending states that run
// with it), compute only its K/V from its exit state, or nothing. It does exactly that and
// records it; no strategy is named here. What each strategy amounts to (BRIEF.md): batch_sync
// carries exited tokens along masked, state_copy writes their K/V at the layers they skip from
// the exit state, deferred_fill leaves those layers to the sequence's next token (pending states
// run with it, so they reach the top together and their K/V is exact), skip_kv writes none, and
// shared_kv reads recursion 1's K/V at deeper recursions (the K/V layout's business).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "decode_batch.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {

DecodeBatch::DecodeBatch(HiddenStates& store, std::span<Sequence* const> sequences,
                         std::size_t points)
    : seqs(sequences),
      positions(sequences.size()),
      running_states(store, sequences.size()),
      kept(sequences.size(), 0),
      exit_state(running_states.slots().begin(), running_states.slots().end()),
      exits(sequences.size(), -1),
      decided_score(sequences.size(), std::numeric_limits<double>::quiet_NaN()),
      exited_at(sequences.size(), policy::k_still_running),
      scores(sequences.size() * points, -std::numeric_limits<double>::infinity()),
      score_spans(sequences.size()),
      argmax_at(sequences.size() * points, -1),
      chosen(sequences.size()),
      fills_at_start(sequences.size()),
      so_far(sequences.size()),
      ran(sequences.size()),
      joined(sequences.size(), 0),
      state_pairs(sequences.size()) {
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    positions[i] = static_cast<std::int32_t>(sequences[i]->tokens.size() - 1);
    fills_at_start[i] = sequences[i]->fill;
    score_spans[i] = {scores.data() + i * points, points};
  }
}

bool DecodeBatch::any_running() const {
  return std::find(exited_at.begin(), exited_at.end(), policy::k_still_running) != exited_at.end();
}

void DecodeBatch::leave(std::size_t i, int point, int depth, double score) {
  exits[i] = point;
  decided_score[i] = score;
  exited_at[i] = depth;
  ran[i].useful_depth = depth;
}

void Engine::Loop::decode_pass(std::span<Sequence* const> seqs) {
  DecodeBatch b(*states_, seqs, exit_depths_.size());
  std::vector<std::int32_t> last_tokens(seqs.size());
  for (std::size_t i = 0; i < seqs.size(); ++i)
    last_tokens[i] = seqs[i]->tokens.back();
  {
    auto timed = span(traces::engine_ops::embed, traces::OpKind::other,
                      static_cast<std::int64_t>(seqs.size()), -1);
    model_.embed(last_tokens, *states_, b.running_states.slots());
  }
  if (feed_ == ExitFeed::upfront)
    decide_upfront(seqs, b.exits);
  const int stacked = model_.depth().stacked_depth();
  for (int layer = 0; layer < stacked; ++layer) {
    decide_before_layer(b, layer);
    plan_layer(b);
    if (!layer_has_work(b, layer))
      break;  // each token's work is a run of layers from the bottom: nothing above either
    keep_exit_states(b, layer);
    run_decode_layer(b, layer);
    decide_after_layer(b, layer);
  }
  // Who is still running reached the top: its running state is its exit state.
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.running(i))
      b.leave(i, static_cast<int>(exit_depths_.size()) - 1, stacked, b.decided_score[i]);
  }
  const std::vector<Correction> corrections = settle_pending(b);
  emit_decoded(b, corrections);
}

policy::SyncStrategy Engine::Loop::planned_strategy() const {
  return exit_policy_ == nullptr ? policy::SyncStrategy::full_depth : options_.strategy;
}

void Engine::Loop::plan_layer(DecodeBatch& b) {
  policy::plan_so_far(planned_strategy(), b.exited_at, model_.depth().stacked_depth(),
                      b.fills_at_start, b.so_far);
}

bool Engine::Loop::layer_has_work(const DecodeBatch& b, int layer) const {
  return std::any_of(b.so_far.begin(), b.so_far.end(), [&](const policy::DepthPlan& p) {
    return p.runs_at(layer) || p.kv_only_at(layer);
  });
}

void Engine::Loop::keep_exit_states(DecodeBatch& b, int layer) {
  std::vector<StateSlot> from, to;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.kept[i] != 0 || !b.so_far[i].masked_at(layer))
      continue;
    if (b.kept_states.empty())
      b.kept_states = HeldStates(*states_, b.size());
    from.push_back(b.running_states[i]);
    to.push_back(b.kept_states[i]);
    b.exit_state[i] = b.kept_states[i];
    b.kept[i] = 1;
  }
  if (!from.empty())
    states_->copy(from, to);
}

void Engine::Loop::run_decode_layer(DecodeBatch& b, int layer) {
  std::vector<StateSlot> slots;  // the call's states: running tokens and pending states with them
  std::vector<LayerRow> rows;
  std::vector<StateSlot> kv_sources;  // K/V-only rows: the tokens' exit states
  std::vector<LayerRow> kv_rows;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const Sequence& s = *b.seqs[i];
    if (b.so_far[i].runs_at(layer)) {
      add_pending_rows(b, i, layer, slots, rows);
      slots.push_back(b.running_states[i]);
      rows.push_back(row_for(s, layer, b.positions[i]));
      b.ran[i].run_depth = layer + 1;
    } else if (b.so_far[i].kv_only_at(layer)) {
      kv_sources.push_back(b.exit_state[i]);
      kv_rows.push_back(row_for(s, layer, b.positions[i]));
      b.ran[i].kv_only_to = layer + 1;
    }
  }
  run_layer(layer, slots, rows);
  if (!kv_rows.empty())
    model_.kv_only(layer, *states_, kv_sources, kv_rows, kv_, {profiler_, step_});
}

void Engine::Loop::add_pending_rows(DecodeBatch& b, std::size_t i, int layer,
                                    std::vector<StateSlot>& slots, std::vector<LayerRow>& rows) {
  // The plan's groups are the sequence's newest pending states, shallowest first: the states
  // running at this layer are the newest fill_tokens_at(layer), in the order they are held.
  std::vector<PendingState>& pending = b.seqs[i]->pending;
  const std::int64_t running = b.so_far[i].fill_tokens_at(layer);
  if (running == 0)
    return;
  const auto first = static_cast<std::int64_t>(pending.size()) - running;
  if (first < 0 || b.ran[i].fill_count == policy::k_max_fill_groups) {
    throw std::logic_error(fmt::format(
        "engine step {}: request {}: the plan runs {} pending states at layer {}; it holds {}",
        step_, b.seqs[i]->request->id.value, running, layer, pending.size()));
  }
  for (auto k = static_cast<std::size_t>(first); k < pending.size(); ++k) {
    PendingState& state = pending[k];
    if (state.depth != layer) {  // it must have run every layer below, and not this one
      throw std::logic_error(fmt::format(
          "engine step {}: request {}: the plan runs the pending state of position {} at "
          "layer {}; it has run {} layers",
          step_, b.seqs[i]->request->id.value, state.position, layer, state.depth));
    }
    slots.push_back(state.hidden[0]);
    rows.push_back(row_for(*b.seqs[i], layer, state.position));
    state.depth = layer + 1;
  }
  // States that run for the first time joined here: a group of the executed plan.
  policy::DepthPlan& ran = b.ran[i];
  if (running > b.joined[i]) {
    ran.fills[ran.fill_count++] = {static_cast<std::int32_t>(running - b.joined[i]), layer};
    b.joined[i] = running;
  }
}

}  // namespace exitsim::engine
