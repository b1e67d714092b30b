// One decode token per sequence through the stack, each leaving at its own exit point, executed
// the way the synchronization strategy says (BRIEF.md): batch_sync carries exited tokens along
// masked, state_copy writes their K/V at the layers they skip from the exit state, deferred_fill
// leaves those layers to the sequence's next token (pending states join it layer by layer while
// it runs, so they reach the top together and their K/V is exact), skip_kv writes none, and
// shared_kv reads recursion 1's K/V at deeper recursions.
#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "exitsim/traces/engine_ops.hpp"
#include "loop.hpp"

namespace exitsim::engine {
namespace {

constexpr double k_unknown = -std::numeric_limits<double>::infinity();

}  // namespace

void Engine::Loop::decode_pass(std::span<Sequence* const> seqs) {
  const std::size_t n = seqs.size();
  const DepthStructure& depth = model_.depth();
  const int stacked = depth.stacked_depth();
  const std::size_t points = exit_depths_.size();
  const int last_point = static_cast<int>(points) - 1;
  const policy::SyncStrategy strategy = options_.strategy;
  const bool carry_exited = strategy == policy::SyncStrategy::batch_sync;
  const bool copy_state = strategy == policy::SyncStrategy::state_copy;
  const bool defer = strategy == policy::SyncStrategy::deferred_fill;

  std::vector<std::int32_t> last_tokens(n), positions(n);
  for (std::size_t i = 0; i < n; ++i) {
    last_tokens[i] = seqs[i]->tokens.back();
    positions[i] = static_cast<std::int32_t>(seqs[i]->tokens.size() - 1);
  }
  // Each token's running state. Once it leaves, that is its exit state (what its head, its pending
  // fill and state_copy's K/V start from) — except under batch_sync, which keeps running it: there
  // the exit state is a copy, in `carried`.
  const HeldStates x(*states_, n);
  const HeldStates carried(*states_, carry_exited ? n : 0);
  std::vector<StateSlot> exit_hidden(x.slots().begin(), x.slots().end());
  {
    auto timed =
        span(traces::engine_ops::embed, traces::OpKind::other, static_cast<std::int64_t>(n), -1);
    model_.embed(last_tokens, *states_, x.slots());
  }
  std::vector<int> exits(n, -1);
  std::vector<double> decided_score(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<std::uint8_t> active(n, 1);
  std::vector<double> scores(n * points, k_unknown);
  std::vector<std::int32_t> argmax_at(n * points, -1);  // oracle
  if (feed_ == ExitFeed::upfront)
    decide_upfront(seqs, exits);

  // The policy sees every token's scores known so far (the rest unknown).
  std::vector<std::span<const double>> score_spans(n);
  for (std::size_t i = 0; i < n; ++i)
    score_spans[i] = {scores.data() + i * points, points};
  std::vector<int> chosen(n);
  const auto choose = [&] { call_exit_policy(seqs, score_spans, false, chosen); };
  // batch_sync's exit states are copied in one call per decision round, before the next layer
  // runs the tokens on.
  std::vector<StateSlot> leaving_from, leaving_to;
  const auto leave = [&](std::size_t i, int point, double score) {
    exits[i] = point;
    decided_score[i] = score;
    if (carry_exited) {
      exit_hidden[i] = carried[i];
      leaving_from.push_back(x[i]);
      leaving_to.push_back(carried[i]);
    }
    active[i] = 0;
  };
  const auto settle_leaves = [&] {
    if (leaving_from.empty())
      return;
    states_->copy(leaving_from, leaving_to);
    leaving_from.clear();
    leaving_to.clear();
  };
  const auto any_active = [&] {
    return std::find(active.begin(), active.end(), 1) != active.end();
  };

  // What the layers below ran, checked against the shared plan after the pass.
  std::vector<int> ran_to(n, 0);
  std::vector<std::int64_t> fill_layers(n, 0);
  std::vector<LayerRow> rows;
  std::vector<StateSlot> slots;  // the call's states: running tokens and pending states joining
  for (int layer = 0; layer < stacked; ++layer) {
    const int recursion = model_.source_of(layer).recursion;
    const bool recursion_starts =
        recursion >= 1 && (layer - depth.prelude_layers) % depth.block_layers == 0;
    if (recursion_starts && feed_ == ExitFeed::token_choice && recursion == 1) {
      for (int r = 1; r <= depth.recursions; ++r) {
        const std::vector<double> s = route(r, x.slots());
        for (std::size_t i = 0; i < n; ++i)
          scores[i * points + static_cast<std::size_t>(r - 1)] = s[i];
      }
      choose();
      for (std::size_t i = 0; i < n; ++i) {
        exits[i] = chosen[i];
        decided_score[i] = scores[i * points + static_cast<std::size_t>(chosen[i])];
      }
    }
    if (recursion_starts && feed_ == ExitFeed::expert_choice) {
      const std::vector<double> s = route(recursion, x.slots());
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i] != 0)
          scores[i * points + static_cast<std::size_t>(recursion - 1)] = s[i];
      }
      choose();
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i] != 0 && chosen[i] < recursion - 1)
          leave(i, chosen[i], s[i]);
      }
    }

    settle_leaves();
    rows.clear();
    slots.clear();
    const bool carry_all = carry_exited && any_active();
    for (std::size_t i = 0; i < n; ++i) {
      if (active[i] == 0 && !carry_all)
        continue;
      if (defer) {
        for (PendingState& p : seqs[i]->pending) {
          if (p.depth <= layer) {
            slots.push_back(p.hidden[0]);
            rows.push_back(row_for(*seqs[i], layer, p.position));
            p.depth = layer + 1;
            ++fill_layers[i];
          }
        }
      }
      slots.push_back(x[i]);
      rows.push_back(row_for(*seqs[i], layer, positions[i]));
      ran_to[i] = layer + 1;
    }
    run_layer(layer, slots, rows);
    if (copy_state) {
      std::vector<LayerRow> copies;
      std::vector<StateSlot> sources;
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i] == 0) {
          copies.push_back(row_for(*seqs[i], layer, positions[i]));
          sources.push_back(exit_hidden[i]);
        }
      }
      if (!copies.empty())
        model_.kv_only(layer, *states_, sources, copies, kv_, {profiler_, step_});
    }

    const int point = point_at_depth(layer + 1);
    if (point >= 0 && point < last_point) {
      if (feed_ == ExitFeed::upfront || feed_ == ExitFeed::token_choice) {
        for (std::size_t i = 0; i < n; ++i) {
          if (active[i] != 0 && exits[i] == point)
            leave(i, point, decided_score[i]);
        }
      } else if (feed_ == ExitFeed::confidence || feed_ == ExitFeed::oracle) {
        std::vector<std::size_t> probed;
        for (std::size_t i = 0; i < n; ++i) {
          if (active[i] != 0)
            probed.push_back(i);
        }
        std::vector<StateSlot> probe_slots;
        std::vector<Sequence*> probe_seqs;
        std::vector<std::int32_t> probe_positions;
        for (const std::size_t i : probed) {
          probe_slots.push_back(x[i]);
          probe_seqs.push_back(seqs[i]);
          probe_positions.push_back(positions[i]);
        }
        const HeadOutput probe = head(probe_slots, probe_seqs, probe_positions, true,
                                      {.probabilities = feed_ == ExitFeed::confidence});
        for (std::size_t k = 0; k < probed.size(); ++k) {
          const std::size_t i = probed[k];
          if (feed_ == ExitFeed::oracle) {
            argmax_at[i * points + static_cast<std::size_t>(point)] =
                static_cast<std::int32_t>(probe.top[k].top1_index);
          } else {
            scores[i * points + static_cast<std::size_t>(point)] = confidence_of(probe.top[k]);
          }
        }
        if (feed_ == ExitFeed::confidence) {
          choose();
          for (const std::size_t i : probed) {
            if (chosen[i] <= point)
              leave(i, point, scores[i * points + static_cast<std::size_t>(point)]);
          }
        }
      }
    }
    if (!any_active() && !copy_state)
      break;
  }
  settle_leaves();
  // Who is still running reached the top: its running state is its exit state.
  for (std::size_t i = 0; i < n; ++i) {
    if (active[i] != 0) {
      exits[i] = last_point;
      active[i] = 0;
    }
  }

  plan_step(seqs, exits, ran_to, fill_layers);

  std::vector<Correction> corrections(n);
  if (defer) {
    std::vector<StateSlot> deferred_from, deferred_to;
    for (std::size_t i = 0; i < n; ++i) {
      const int reached = exit_depths_[static_cast<std::size_t>(exits[i])];
      std::vector<PendingState>& pending = seqs[i]->pending;
      if (reached >= stacked) {
        // Every pending state rode along to the top: its K/V is complete.
        result_.filled_states += static_cast<std::int64_t>(pending.size());
        if (options_.rollback && !pending.empty())
          corrections[i] = check_filled(*seqs[i]);
        pending.clear();
      } else {
        pending.push_back({HeldStates(*states_, 1), positions[i], reached});
        deferred_from.push_back(exit_hidden[i]);
        deferred_to.push_back(pending.back().hidden[0]);
      }
    }
    if (!deferred_from.empty())
      states_->copy(deferred_from, deferred_to);
    for (std::size_t i = 0; i < n; ++i)
      check_pending(*seqs[i]);
  }

  const HeadOutput out = head(exit_hidden, seqs, positions, false, emission_wants());
  auto timed = span(traces::engine_ops::sampling, traces::OpKind::sampling,
                    static_cast<std::int64_t>(n), -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (corrections[i].position >= 0) {
      roll_back(*seqs[i], corrections[i]);
      continue;
    }
    const std::int32_t token = sample(*seqs[i], out, i);
    int point = exits[i];
    double score = decided_score[i];
    if (feed_ == ExitFeed::oracle) {
      // The earliest exit point whose prediction already equals the full-depth one.
      const auto best = static_cast<std::int32_t>(out.top[i].top1_index);
      point = last_point;
      for (int p = 0; p < last_point; ++p) {
        if (argmax_at[i * points + static_cast<std::size_t>(p)] == best) {
          point = p;
          break;
        }
      }
      score = point < last_point ? 1.0 : 0.0;
    }
    emit(*seqs[i], token, point, score, out.logits_of(i));
  }
}

void Engine::Loop::plan_step(std::span<Sequence* const> seqs, std::span<const int> exits,
                             std::span<const int> ran_to,
                             std::span<const std::int64_t> fill_layers) {
  // The shared plan of the step from the exits the policy chose (decided before the pass, or as
  // the model's scores came in): what each token runs, which pending states join it. The pass
  // above is its execution; a difference is a bug in one of the two, never a user error.
  const std::size_t n = seqs.size();
  const int stacked = model_.depth().stacked_depth();
  std::vector<int> depths(n);
  std::vector<policy::PendingFill> fills(n);
  std::vector<policy::DepthPlan> plans(n);
  for (std::size_t i = 0; i < n; ++i) {
    depths[i] = exit_depths_[static_cast<std::size_t>(exits[i])];
    fills[i] = seqs[i]->fill;
  }
  const policy::SyncStrategy strategy =
      exit_policy_ == nullptr ? policy::SyncStrategy::full_depth : options_.strategy;
  policy::plan_depths(strategy, depths, stacked, fills, plans);
  for (std::size_t i = 0; i < n; ++i) {
    const policy::DepthPlan& p = plans[i];
    if (ran_to[i] != p.run_depth || fill_layers[i] != p.fill_layers()) {
      throw std::logic_error(fmt::format(
          "engine step {}: request {} ran {} layers with {} fill token-layers; the shared plan "
          "says {} and {}",
          step_, seqs[i]->request->id.value, ran_to[i], fill_layers[i], p.run_depth,
          p.fill_layers()));
    }
    seqs[i]->fill = fills[i];
    seqs[i]->plan = p;
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
