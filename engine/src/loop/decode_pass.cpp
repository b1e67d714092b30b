// One decode token per sequence through the stack, each leaving at its own exit point, executed
// the way the synchronization strategy says (BRIEF.md): batch_sync carries exited tokens along
// masked, state_copy writes their K/V at the layers they skip from the exit state, deferred_fill
// leaves those layers to the sequence's next token (pending states join it layer by layer while
// it runs, so they reach the top together and their K/V is exact), skip_kv writes none, and
// shared_kv reads recursion 1's K/V at deeper recursions.
#include <limits>

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
  Matrix x;
  {
    auto timed =
        span(traces::engine_ops::embed, traces::OpKind::other, static_cast<std::int64_t>(n), -1);
    x = model_.embed(last_tokens);
  }
  Matrix exit_hidden(x.rows(), x.cols());
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
  const auto leave = [&](std::size_t i, int point, double score) {
    exits[i] = point;
    decided_score[i] = score;
    exit_hidden.row(static_cast<Eigen::Index>(i)) = x.row(static_cast<Eigen::Index>(i));
    active[i] = 0;
  };
  const auto any_active = [&] {
    return std::find(active.begin(), active.end(), 1) != active.end();
  };

  std::vector<LayerRow> rows;
  std::vector<std::pair<std::size_t, PendingState*>> members;  // (token, pending or nullptr)
  for (int layer = 0; layer < stacked; ++layer) {
    const int recursion = model_.source_of(layer).recursion;
    const bool recursion_starts =
        recursion >= 1 && (layer - depth.prelude_layers) % depth.block_layers == 0;
    if (recursion_starts && feed_ == ExitFeed::token_choice && recursion == 1) {
      for (int r = 1; r <= depth.recursions; ++r) {
        const std::vector<double> s = route(r, x);
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
      const std::vector<double> s = route(recursion, x);
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

    rows.clear();
    members.clear();
    const bool carry_all = carry_exited && any_active();
    for (std::size_t i = 0; i < n; ++i) {
      if (active[i] == 0 && !carry_all)
        continue;
      if (defer) {
        for (PendingState& p : seqs[i]->pending) {
          if (p.depth <= layer) {
            members.emplace_back(i, &p);
            rows.push_back(row_for(*seqs[i], layer, p.position));
          }
        }
      }
      members.emplace_back(i, nullptr);
      rows.push_back(row_for(*seqs[i], layer, positions[i]));
    }
    if (!rows.empty()) {
      Matrix xs(static_cast<Eigen::Index>(rows.size()), x.cols());
      {
        // Gathering the tokens still running (and pending states joining) is the compaction
        // that exits cost; scattering back is counted with it below.
        auto timed = span(traces::engine_ops::compaction, traces::OpKind::memcpy,
                          static_cast<std::int64_t>(rows.size()), layer);
        for (std::size_t m = 0; m < members.size(); ++m) {
          const auto& [i, pending] = members[m];
          xs.row(static_cast<Eigen::Index>(m)) =
              pending != nullptr ? pending->hidden : x.row(static_cast<Eigen::Index>(i));
        }
      }
      run_layer(layer, xs, rows, defer ? "decode.layer+fill" : "decode.layer");
      auto timed = span(traces::engine_ops::compaction, traces::OpKind::memcpy,
                        static_cast<std::int64_t>(rows.size()), layer);
      for (std::size_t m = 0; m < members.size(); ++m) {
        const auto& [i, pending] = members[m];
        if (pending != nullptr) {
          pending->hidden = xs.row(static_cast<Eigen::Index>(m));
          pending->depth = layer + 1;
        } else {
          x.row(static_cast<Eigen::Index>(i)) = xs.row(static_cast<Eigen::Index>(m));
        }
      }
    }
    if (copy_state) {
      std::vector<LayerRow> copies;
      std::vector<Eigen::Index> sources;
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i] == 0) {
          copies.push_back(row_for(*seqs[i], layer, positions[i]));
          sources.push_back(static_cast<Eigen::Index>(i));
        }
      }
      if (!copies.empty()) {
        Matrix states(static_cast<Eigen::Index>(sources.size()), x.cols());
        for (std::size_t k = 0; k < sources.size(); ++k)
          states.row(static_cast<Eigen::Index>(k)) = exit_hidden.row(sources[k]);
        model_.kv_only(layer, states, copies, kv_, {profiler_, step_});
      }
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
        Matrix states(static_cast<Eigen::Index>(probed.size()), x.cols());
        std::vector<Sequence*> probe_seqs;
        std::vector<std::int32_t> probe_positions;
        for (std::size_t k = 0; k < probed.size(); ++k) {
          states.row(static_cast<Eigen::Index>(k)) = x.row(static_cast<Eigen::Index>(probed[k]));
          probe_seqs.push_back(seqs[probed[k]]);
          probe_positions.push_back(positions[probed[k]]);
        }
        const Matrix logits = head(states, probe_seqs, probe_positions, true);
        for (std::size_t k = 0; k < probed.size(); ++k) {
          const std::size_t i = probed[k];
          const auto row = static_cast<Eigen::Index>(k);
          if (feed_ == ExitFeed::oracle) {
            Eigen::Index best = 0;
            logits.row(row).maxCoeff(&best);
            argmax_at[i * points + static_cast<std::size_t>(point)] =
                static_cast<std::int32_t>(best);
          } else {
            scores[i * points + static_cast<std::size_t>(point)] = confidence_of(logits.row(row));
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
  for (std::size_t i = 0; i < n; ++i) {
    if (active[i] != 0)
      leave(i, last_point, decided_score[i]);
  }

  std::vector<Correction> corrections(n);
  if (defer) {
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
        pending.push_back({exit_hidden.row(static_cast<Eigen::Index>(i)), positions[i], reached});
      }
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    result_.steps.back().entries.push_back({seqs[i]->request->id, 1, positions[i],
                                            exit_depths_[static_cast<std::size_t>(exits[i])],
                                            true});
  }
  const Matrix logits = head(exit_hidden, seqs, positions, false);
  auto timed = span(traces::engine_ops::sampling, traces::OpKind::sampling,
                    static_cast<std::int64_t>(n), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto row = static_cast<Eigen::Index>(i);
    if (corrections[i].position >= 0) {
      roll_back(*seqs[i], corrections[i]);
      continue;
    }
    const std::int32_t token = sample(*seqs[i], logits.row(row));
    int point = exits[i];
    double score = decided_score[i];
    if (feed_ == ExitFeed::oracle) {
      // The earliest exit point whose prediction already equals the full-depth one.
      Eigen::Index best = 0;
      logits.row(row).maxCoeff(&best);
      point = last_point;
      for (int p = 0; p < last_point; ++p) {
        if (argmax_at[i * points + static_cast<std::size_t>(p)] == best) {
          point = p;
          break;
        }
      }
      score = point < last_point ? 1.0 : 0.0;
    }
    emit(*seqs[i], token, point, score, logits.row(row));
  }
}

}  // namespace exitsim::engine
