#pragma once

// One decode pass's tokens (decode_pass.cpp): their running and exit states, the exits decided so
// far, the shared plan of those exits, and what the layers ran for each token.

#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/engine/hidden_states.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "loop.hpp"

namespace exitsim::engine {

// A completed fill state's calibration pair (adaptive_threshold), and the token it belongs to.
struct StatePair {
  double confidence = 0;
  bool agrees = false;
  std::size_t token_index = 0;  // into EngineRun::tokens
};

struct DecodeBatch {
  // `points` exit points; the running states are allocated, not yet embedded.
  DecodeBatch(HiddenStates& store, std::span<Sequence* const> sequences, std::size_t points);

  std::size_t size() const { return seqs.size(); }
  bool running(std::size_t i) const { return exited_at[i] == policy::k_still_running; }
  bool any_running() const;
  // Token i leaves at exit point `point` (stack depth `depth`) with the policy's `score`: its
  // running state is its exit state from here on, unless a layer carries it on (keep_exit_states).
  void leave(std::size_t i, int point, int depth, double score);

  std::span<Sequence* const> seqs;
  std::vector<std::int32_t> positions;  // of the tokens decoded
  HeldStates running_states;
  // Exit states of tokens a layer carries on past their exit (masked rows), copied before it runs;
  // allocated when the first one is.
  HeldStates kept_states;
  std::vector<std::uint8_t> kept;     // token i's exit state is in kept_states
  std::vector<StateSlot> exit_state;  // what the head, K/V-only rows and a waiting state read

  std::vector<int> exits;             // exit point decided (before, or as it leaves); -1: unknown
  std::vector<double> decided_score;  // the policy's score of that decision
  std::vector<int> exited_at;         // exit depth once it left; policy::k_still_running before
  std::vector<double> scores;         // per token, per exit point: confidences or router scores
  std::vector<std::span<const double>> score_spans;  // token i's row of `scores`
  // Per token, per exit point, the prediction there (oracle, adaptive_threshold's pairs).
  std::vector<std::int32_t> argmax_at;
  std::vector<int> chosen;  // the exit policy's answer

  // Each sequence's pending fill as the pass found it (the plan's input at every layer; the
  // sequences' own change only when the pass settles).
  std::vector<policy::PendingFill> fills_at_start;
  std::vector<policy::DepthPlan> so_far;  // policy::plan_so_far at the layer about to run
  // What the layers ran for each token, in the plan's terms: the StepRow's plan.
  std::vector<policy::DepthPlan> ran;
  std::vector<std::int64_t> joined;  // pending states that have run with token i so far
  // adaptive_threshold: token i's completed fill states' pairs, oldest first.
  std::vector<std::vector<StatePair>> state_pairs;
};

}  // namespace exitsim::engine
