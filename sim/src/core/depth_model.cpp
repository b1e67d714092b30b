#include "depth_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/setup/policy_params.hpp"
#include "exitsim/setup/replay_lookup.hpp"
#include "measured_exits.hpp"

namespace exitsim::sim {
namespace {

policy::ExitPolicyParams exit_params(const scenario::ExitPolicyConfig& config,
                                     const std::string& strategy, const DepthStructure& depth) {
  policy::ExitPolicyParams params = setup::exit_policy_params(config);
  if (uses_measured_exits(config)) {
    params.kind = "distribution";
    params.probabilities = measured_exit_distribution(config, strategy, depth);
    params.position_buckets.clear();
  } else if (config.kind == "replay") {
    params.replay_lookup = setup::token_trace_lookup(config.token_trace, depth);
  }
  return params;
}

}  // namespace

DepthModel::DepthModel(const scenario::ExitPolicyConfig& exit_policy,
                       const scenario::SyncConfig& sync, const ModelShape& model,
                       std::uint64_t seed, int replica)
    : full_depth_(model.depth.stacked_depth()),
      depth_(model.depth),
      strategy_(setup::sync_strategy(sync)),
      depthwise_rule_(setup::depthwise_rule(sync)),
      rollback_probability_(
          strategy_ == policy::SyncStrategy::deferred_fill ? sync.rollback_probability : 0.0),
      exit_draws_(policy::exit_draws(seed)),
      rollback_draw_(seed, "exit.rollback") {
  const bool exits = exit_policy.kind != "none";
  // Shared K/V changes memory and attention work even when every token runs the full depth, and
  // depth-wise batching the way every token is stepped.
  dynamic_ = strategy_ != policy::SyncStrategy::full_depth &&
             (exits || strategy_ == policy::SyncStrategy::shared_kv || depthwise());
  if (depthwise())
    policy::check_depthwise_exit_points(model.depth);
  policy::check_exit_policy_for(strategy_, exit_policy.kind);
  if (strategy_ == policy::SyncStrategy::deferred_fill)
    policy::check_deferred_fill_exit_points(model.depth.effective_exit_points().size());
  if ((exits || depthwise()) &&
      model.depth.recursions > static_cast<int>(k_max_recursion_contexts)) {
    throw InputError({"", 0, 0, "model.depth.recursions"},
                     expected_found(fmt::format("at most {} recursions for dynamic depth",
                                                k_max_recursion_contexts),
                                    std::to_string(model.depth.recursions)));
  }
  // full_depth is the baseline in which nobody exits, whatever the exit policy says.
  if (!exits || strategy_ == policy::SyncStrategy::full_depth)
    return;
  policy_ =
      policy::make_exit_policy(exit_params(exit_policy, sync.strategy, model.depth), model.depth);
  if (const policy::AdaptiveThresholdSettings* settings = policy_->adaptive_settings()) {
    const std::size_t below = policy_->exit_points().size() - 1;
    adaptive_.emplace(*settings, make_confidence_source(exit_policy, below, seed), below, replica);
  }
  // Synthetic router scores only when the scenario asks for them by name.
  scored_ = !uses_measured_exits(exit_policy) && (exit_policy.kind == "router_token_choice" ||
                                                  exit_policy.kind == "router_expert_choice");
}

bool DepthModel::skips_kv() const {
  return strategy_ == policy::SyncStrategy::skip_kv || depthwise();
}

void DepthModel::set_recursion_contexts(policy::StepRow& row,
                                        const SequenceDepthState& state) const {
  if (!dynamic_ || !skips_kv() || depth_.recursions < 1)
    return;
  // Requests are at most 2^31 tokens long (the trace readers' limit), so this fits.
  row.recursion_contexts = static_cast<std::uint8_t>(depth_.recursions);
  for (int r = 0; r < depth_.recursions; ++r) {
    row.recursion_context[static_cast<std::size_t>(r)] =
        static_cast<std::int32_t>(state.reached[static_cast<std::size_t>(r)]);
  }
}

void DepthModel::plan_prefill(policy::StepRow& row, const SequenceDepthState& state) const {
  row.kind = policy::RowKind::prefill;
  row.plan.run_depth = full_depth_;
  row.plan.useful_depth = full_depth_;
  row.exit_depth = full_depth_;
  set_recursion_contexts(row, state);
}

void DepthModel::on_prefill(SequenceDepthState& state, std::int64_t tokens) const {
  for (auto& reached : state.reached)
    reached += tokens;
}

void DepthModel::on_step_start(std::int64_t admitted, std::int64_t step, TimeNs now) {
  if (adaptive_)
    adaptive_->on_admissions(admitted, step, now);
}

void DepthModel::choose_exit_depths(std::span<const DecodeToken> tokens) {
  const std::size_t n = tokens.size();
  const std::size_t points = policy_->exit_points().size();
  exit_tokens_.resize(n);
  score_values_.resize(scored_ ? n * points : 0);
  if (adaptive_) {
    // The confidences (and agreements) at the exit points below the top, from the source.
    const std::size_t below = points - 1;
    score_values_.resize(n * below);
    agree_values_.resize(n * below);
    for (std::size_t i = 0; i < n; ++i) {
      adaptive_->source().token(tokens[i].request, tokens[i].position,
                                {score_values_.data() + i * below, below},
                                {agree_values_.data() + i * below, below});
    }
  }
  scratch_.resize(n);
  exit_index_.resize(n);
  token_draws_.resize(scored_ ? points + 1 : 1);
  std::int64_t max_position = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // Draw 0 decides the exit; draws 1..points are the scores at the exit points.
    exit_draws_.fill(tokens[i].request.value, static_cast<std::uint64_t>(tokens[i].position),
                     token_draws_);
    std::span<const double> scores;
    if (scored_) {
      std::copy(token_draws_.begin() + 1, token_draws_.end(),
                score_values_.begin() + static_cast<std::ptrdiff_t>(i * points));
      scores = {score_values_.data() + i * points, points};
    }
    if (adaptive_)
      scores = {score_values_.data() + i * (points - 1), points - 1};
    exit_tokens_[i] = {tokens[i].request, tokens[i].position, token_draws_[0], scores};
    max_position = std::max(max_position, tokens[i].max_position);
  }

  const std::optional<double> threshold =
      adaptive_ ? std::optional<double>(adaptive_->threshold()) : std::nullopt;
  policy_->choose_exits({exit_tokens_, max_position, scratch_, threshold}, exit_index_);
  exit_depth_.resize(n);
  const std::span<const int> exit_points = policy_->exit_points();
  for (std::size_t i = 0; i < n; ++i)
    exit_depth_[i] = exit_points[static_cast<std::size_t>(exit_index_[i])];
}

void DepthModel::collect_pairs(std::size_t i, const policy::DepthPlan& plan,
                               SequenceDepthState& state) {
  const std::size_t below = adaptive_->points_below_top();
  const std::span<const double> confidences(score_values_.data() + i * below, below);
  const std::span<const std::uint8_t> agrees(agree_values_.data() + i * below, below);
  if (plan.exit_state_waits) {
    const auto point = static_cast<std::size_t>(exit_index_[i]);
    AdaptiveThresholdRun::on_state_waits(state.pending_pairs, confidences[point],
                                         agrees[point] != 0);
  } else if (plan.fills_complete) {
    adaptive_->on_fill_complete(state.pending_pairs, confidences, agrees);
  }
}

FillWork DepthModel::plan(std::span<const DecodeToken> tokens, std::span<policy::StepRow> rows) {
  const std::size_t n = tokens.size();
  if (!dynamic_) {
    // Without exits every token's plan is the whole stack, the same for all: planned once.
    policy::DepthPlan whole;
    const int depth = full_depth_;
    policy::plan_depths(policy::SyncStrategy::full_depth, std::span<const int>(&depth, 1),
                        full_depth_, {}, std::span<policy::DepthPlan>(&whole, 1));
    for (const DecodeToken& token : tokens) {
      policy::StepRow& row = rows[token.row_index];
      row.kind = policy::RowKind::decode;
      row.plan.assign_used(whole);
      row.exit_depth = whole.useful_depth;
    }
    return FillWork{};  // the whole stack fills nothing
  }
  // Dynamic from here on: exits, shared K/V or depth-wise stepping.
  exit_depth_.resize(n);
  if (policy_ != nullptr) {
    choose_exit_depths(tokens);
  } else {
    std::fill(exit_depth_.begin(), exit_depth_.end(), full_depth_);
  }
  const bool fills = strategy_ == policy::SyncStrategy::deferred_fill;
  // Without an exit policy (shared_kv alone) every token runs the whole stack; shared_kv still
  // changes the K/V work. Each token is planned as policy::plan_depths plans it, straight into
  // its row and its sequence's pending states.
  const int deepest = policy::deepest_exit(exit_depth_);
  const bool recursive = depth_.block_layers > 0 && depth_.recursions > 0;
  FillWork fill;
  for (std::size_t i = 0; i < n; ++i) {
    SequenceDepthState& state = *tokens[i].state;
    policy::StepRow& row = rows[tokens[i].row_index];
    policy::plan_token_depth(strategy_, exit_depth_[i], deepest, full_depth_,
                             fills ? &state.pending : nullptr, row.plan);
    const policy::DepthPlan& p = row.plan;
    row.kind = policy::RowKind::decode;
    set_recursion_contexts(row, state);
    row.exit_depth = p.useful_depth;
    fill.add(p);
    if (fills && adaptive_)
      collect_pairs(i, p, state);
    if (rollback_probability_ > 0 && p.fills_complete) {
      const std::int64_t filled = p.fill_tokens();
      for (std::int64_t k = 0; k < filled; ++k) {
        // Keyed by the filling token and the state's rank, like the exit draws.
        if (rollback_draw_(tokens[i].request.value, static_cast<std::uint64_t>(tokens[i].position),
                           static_cast<std::uint64_t>(k)) < rollback_probability_) {
          state.rollback = filled - k;
          break;
        }
      }
    }
    // The token's K/V now exists at every recursion it ran (skip_kv's context for later tokens).
    if (recursive) {
      const int recursions_run = depth_.recursion_of_depth(p.run_depth);
      for (int r = 0; r < std::min<int>(recursions_run, k_max_recursion_contexts); ++r) {
        state.reached[static_cast<std::size_t>(r)] += 1;
      }
    }
  }
  return fill;
}

void DepthModel::plan_depthwise(std::span<const DecodeToken> tokens,
                                std::span<policy::StepRow> rows) {
  // Tokens entering the block draw their exit point now: the policy sees them as one batch.
  entering_.clear();
  for (const DecodeToken& token : tokens) {
    if (token.state->stage.next_recursion() == 1)
      entering_.push_back(token);
  }
  if (policy_ != nullptr && !entering_.empty()) {
    choose_exit_depths(entering_);
    for (std::size_t k = 0; k < entering_.size(); ++k)
      entering_[k].state->exit_depth = exit_depth_[k];
  } else {
    for (const DecodeToken& token : entering_)
      token.state->exit_depth = full_depth_;
  }

  const std::size_t n = tokens.size();
  stages_.resize(n);
  left_block_.resize(n);
  runs_head_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    SequenceDepthState& state = *tokens[i].state;
    policy::StepRow& row = rows[tokens[i].row_index];
    row.kind = policy::RowKind::depthwise;
    row.emits = false;
    stages_[i] = state.stage;
    left_block_[i] = 0;
    const int recursion = state.stage.next_recursion();
    row.recursion = recursion;
    if (recursion == 0)
      continue;  // waiting for the head: no work unless it runs below
    const auto r = static_cast<std::size_t>(recursion - 1);
    row.recursion_contexts = 1;
    row.recursion_context[0] = static_cast<std::int32_t>(state.reached[r]);
    if (r < k_max_recursion_contexts)
      state.reached[r] += 1;
    left_block_[i] = depth_.prelude_layers + recursion * depth_.block_layers >= state.exit_depth;
  }
  policy::finish_depthwise_step(depthwise_rule_, stages_, left_block_, runs_head_);
  for (std::size_t i = 0; i < n; ++i) {
    SequenceDepthState& state = *tokens[i].state;
    state.stage = stages_[i];
    if (runs_head_[i] == 0)
      continue;
    policy::StepRow& row = rows[tokens[i].row_index];
    row.runs_head = true;
    row.emits = true;
    row.exit_depth = state.exit_depth;
  }
}

}  // namespace exitsim::sim
