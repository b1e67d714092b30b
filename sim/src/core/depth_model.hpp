#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "adaptive_threshold_run.hpp"
#include "exitsim/core/ids.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/random.hpp"
#include "exitsim/policy/depthwise.hpp"
#include "exitsim/policy/exit_policy.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {

// Per sequence, what the depth model remembers between its tokens.
struct SequenceDepthState {
  policy::PendingFill pending;  // deferred_fill
  // skip_kv: tokens (prompt included) whose K/V exists at recursion r + 1.
  std::array<std::int64_t, k_max_recursion_contexts> reached{};
  // depthwise: the in-flight token's stage and the exit point (stack depth) it drew on entering.
  policy::DepthwiseStage stage;
  int exit_depth = 0;
  // deferred_fill with rollback: output tokens the iteration in flight discards at completion.
  std::int64_t rollback = 0;
  // adaptive_threshold under deferred_fill: the calibration pairs of the pending states (one per
  // state, oldest first), sent to the estimator when a deep token completes their fill.
  std::vector<PendingPair> pending_pairs;

  // A depth-wise token still mid-stack or waiting for its head: this iteration emits nothing.
  bool token_in_flight() const { return stage != policy::DepthwiseStage{}; }
};

// One decode token of the iteration, as the depth model sees it.
struct DecodeToken {
  std::size_t row_index = 0;  // its row in the iteration's step
  RequestId request;
  std::int64_t position = 0;      // output position of the token being generated
  std::int64_t max_position = 0;  // its sequence's output length
  SequenceDepthState* state = nullptr;
};

// Decides each decode token's exit with the shared exit policy, plans the batch with the shared
// synchronization strategy, and writes the resulting work into the batch entries the cost model
// prices. A token's draws are keyed by the token (policy::exit_uniform), as the engine's are.
class DepthModel {
 public:
  // `replica`: the replica's index, for adaptive_threshold's trajectory.
  DepthModel(const scenario::ExitPolicyConfig& exit_policy, const scenario::SyncConfig& sync,
             const ModelShape& model, std::uint64_t seed, int replica = 0);

  // False for static depth (no exits): entries keep the full depth and nothing is sampled.
  bool dynamic() const { return dynamic_; }
  int full_depth() const { return full_depth_; }
  policy::SyncStrategy strategy() const { return strategy_; }
  // Whether exited tokens store no K/V at the recursions they skipped (skip_kv, depthwise).
  bool skips_kv() const;
  bool depthwise() const { return strategy_ == policy::SyncStrategy::depthwise; }
  // Depth-wise batching whose exited tokens wait in a head queue outside the block.
  bool parks_in_head_queue() const { return depthwise() && depthwise_rule_.parks_in_head_queue(); }

  // Plans the decode rows of `tokens` (policy::plan_depths over the shared exit policy's exits)
  // into `rows` (each token's row_index), exit depths included. Returns the deferred-fill work.
  // With deferred_fill rollback, a fill of m states reaching the top draws, per state, whether its
  // shallow prediction disagrees with the deep one; at the earliest disagreeing (k-th, oldest
  // first) the token's state gets rollback = m - k: its output is replaced by the deep prediction
  // and everything emitted after it (this iteration's token included) is discarded.
  FillWork plan(std::span<const DecodeToken> tokens, std::span<policy::StepRow> rows);
  // The depth-wise step: each token runs one recursion of the shared block (tokens entering run
  // the prelude first); a token whose coda and head run this step emits (exit depth in its row).
  // A token waiting for the head does nothing until its head runs.
  void plan_depthwise(std::span<const DecodeToken> tokens, std::span<policy::StepRow> rows);
  // At the start of step `step` (1-based) at `now`, before its exits: `admitted` requests were
  // admitted for the first time. adaptive_threshold's estimator may refit (the shared rule).
  void on_step_start(std::int64_t admitted, std::int64_t step, TimeNs now);
  // adaptive_threshold's estimator and trajectory; null for other policies.
  const AdaptiveThresholdRun* adaptive() const { return adaptive_ ? &*adaptive_ : nullptr; }
  // A prompt (or recompute) row: prefill runs every layer; under skip_kv its attention reads
  // each recursion's own context.
  void plan_prefill(policy::StepRow& row, const SequenceDepthState& state) const;
  // After a prefill chunk of `tokens` tokens: those tokens reached every recursion.
  void on_prefill(SequenceDepthState& state, std::int64_t tokens) const;

 private:
  void set_recursion_contexts(policy::StepRow& row, const SequenceDepthState& state) const;
  // The exit policy's exit point (stack depth) of each token, into exit_depth_ (same order).
  void choose_exit_depths(std::span<const DecodeToken> tokens);
  // adaptive_threshold under deferred_fill: token i's calibration pairs after its plan.
  void collect_pairs(std::size_t i, const policy::DepthPlan& plan, SequenceDepthState& state);

  bool dynamic_ = false;
  int full_depth_ = 0;
  DepthStructure depth_;
  policy::SyncStrategy strategy_ = policy::SyncStrategy::full_depth;
  std::unique_ptr<policy::ExitPolicy> policy_;
  bool scored_ = false;  // the policy reads router scores
  policy::DepthwiseRule depthwise_rule_;
  std::optional<AdaptiveThresholdRun> adaptive_;
  std::vector<std::uint8_t> agree_values_;  // adaptive_threshold: per token and point below top
  double rollback_probability_ = 0;
  // Exit draws are keyed by the token: policy::exit_uniform's stream for the run's seed.
  KeyedUniform exit_draws_;
  KeyedUniform rollback_draw_;  // deferred_fill's rollback draws, keyed by the filling token
  // Reused every iteration.
  std::vector<policy::ExitToken> exit_tokens_;
  std::vector<double> score_values_;
  std::vector<double> token_draws_;  // one token's draws (KeyedUniform::fill)
  std::vector<std::size_t> scratch_;
  std::vector<int> exit_index_;
  std::vector<int> exit_depth_;
  std::vector<DecodeToken> entering_;
  std::vector<policy::DepthwiseStage> stages_;
  std::vector<std::uint8_t> left_block_;
  std::vector<std::uint8_t> runs_head_;
};

}  // namespace exitsim::sim
