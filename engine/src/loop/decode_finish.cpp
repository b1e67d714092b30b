// After the decode pass's layers: the sequences' pending states as the plan of the exits taken
// leaves them, and each token's head, sample and emission.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "decode_batch.hpp"
#include "exitsim/traces/engine_ops.hpp"

namespace exitsim::engine {

std::vector<Correction> Engine::Loop::settle_pending(DecodeBatch& b) {
  // The plan of the exits taken: what it leaves pending (seq.fill) and whether each token's exit
  // state waits. The pass ran the layers of this plan already, one layer at a time.
  const std::size_t n = b.size();
  const int stacked = model_.depth().stacked_depth();
  std::vector<policy::PendingFill>& fills = b.fills_at_start;  // updated to what stays pending
  std::vector<policy::DepthPlan> plans(n);
  policy::plan_depths(planned_strategy(), b.exited_at, stacked, fills, plans);

  std::vector<Correction> corrections(n);
  std::vector<StateSlot> waiting_from, waiting_to;
  for (std::size_t i = 0; i < n; ++i) {
    Sequence& s = *b.seqs[i];
    s.fill = fills[i];
    // States that ran to the top have their K/V complete: they leave the pending list.
    const auto filled =
        std::stable_partition(s.pending.begin(), s.pending.end(),
                              [&](const PendingState& p) { return p.depth < stacked; });
    const auto complete = static_cast<std::int64_t>(s.pending.end() - filled);
    result_.filled_states += complete;
    if (complete > 0 && (options_.rollback || estimator_)) {
      // The filled states' deep predictions: rollback compares them with the tokens emitted,
      // adaptive_threshold with the predictions made at the exit points (FREE computes them
      // only then).
      const std::span<const PendingState> done{filled, s.pending.end()};
      const HeadOutput deep = filled_head(s, done);
      if (options_.rollback)
        corrections[i] = check_filled(s, done, deep);
      if (estimator_)
        collect_state_pairs(b, i, done, deep);
    }
    s.pending.erase(filled, s.pending.end());
    b.ran[i].fills_complete = complete > 0 && complete == b.joined[i];
    if (plans[i].exit_state_waits) {
      s.pending.push_back({HeldStates(*states_, 1), b.positions[i], b.ran[i].useful_depth});
      waiting_from.push_back(b.exit_state[i]);
      waiting_to.push_back(s.pending.back().hidden[0]);
      b.ran[i].exit_state_waits = true;
    }
  }
  if (!waiting_from.empty())
    states_->copy(waiting_from, waiting_to);
  for (std::size_t i = 0; i < n; ++i) {
    check_pending(*b.seqs[i]);
    b.seqs[i]->plan = b.ran[i];
  }
  return corrections;
}

void Engine::Loop::emit_decoded(DecodeBatch& b, std::span<const Correction> corrections) {
  const HeadOutput out = head(b.exit_state, b.seqs, b.positions, false, emission_wants());
  auto timed = span(traces::engine_ops::sampling, traces::OpKind::sampling,
                    static_cast<std::int64_t>(b.size()), -1);
  const int last_point = static_cast<int>(exit_depths_.size()) - 1;
  const auto points = exit_depths_.size();
  for (std::size_t i = 0; i < b.size(); ++i) {
    count_exit(*b.seqs[i], b.exits[i]);  // decided, whether or not a rollback replaces it
    if (corrections[i].position >= 0) {
      roll_back(*b.seqs[i], corrections[i]);
      if (estimator_)  // the pass's pairs count; the deep token itself was discarded
        add_calibration_pairs(b, i, static_cast<std::int32_t>(out.top[i].top1_index), nullptr);
      continue;
    }
    const std::int32_t token = sample(*b.seqs[i], out, i);
    int point = b.exits[i];
    double score = b.decided_score[i];
    if (feed_ == ExitFeed::oracle) {
      // The earliest exit point whose prediction already equals the full-depth one.
      const auto best = static_cast<std::int32_t>(out.top[i].top1_index);
      point = last_point;
      for (int p = 0; p < last_point; ++p) {
        if (b.argmax_at[i * points + static_cast<std::size_t>(p)] == best) {
          point = p;
          break;
        }
      }
      score = point < last_point ? 1.0 : 0.0;
    }
    emit(*b.seqs[i], token, point, score, out.logits_of(i));
    if (estimator_) {
      record_exit_calibration(b, i);
      add_calibration_pairs(b, i, static_cast<std::int32_t>(out.top[i].top1_index),
                            &result_.tokens.back());
    }
  }
}

void Engine::Loop::check_pending(const Sequence& s) const {
  // The pending states, oldest first, grouped by depth, are the plan's groups.
  policy::PendingFill held;
  for (const PendingState& p : s.pending) {
    if (held.count > 0 && held.groups[held.count - 1].depth == p.depth) {
      held.groups[held.count - 1].tokens += 1;
    } else if (held.count < policy::k_max_fill_groups) {
      held.groups[held.count++] = {1, p.depth};
    } else {
      held.count = policy::k_max_fill_groups + 1;
      break;
    }
  }
  if (held.count > policy::k_max_fill_groups || !(held == s.fill)) {
    throw std::logic_error(
        fmt::format("engine step {}: request {} holds {} pending states that "
                    "differ from the shared plan's {}",
                    step_, s.request->id.value, s.pending.size(), s.fill.tokens()));
  }
}

}  // namespace exitsim::engine
