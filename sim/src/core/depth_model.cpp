#include "depth_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/policy/exit_table.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::sim {
namespace {

policy::SyncStrategy strategy_from(const scenario::SyncConfig& sync) {
  if (sync.strategy == "depthwise") {
    throw InputError({"", 0, 0, "sync.strategy"},
                     "depthwise batching is not simulated yet; use full_depth, batch_sync, "
                     "state_copy, deferred_fill, skip_kv or shared_kv");
  }
  const auto strategy = policy::parse_sync_strategy(sync.strategy);
  if (!strategy) {
    throw_setting_error("sync.strategy", "a synchronization strategy", "\"" + sync.strategy + "\"");
  }
  return *strategy;
}

// The simulator has no model to measure confidences or agreement with: it uses the exit
// distribution the engine measured at this threshold (a threshold table) instead.
std::vector<double> table_distribution(const scenario::ExitPolicyConfig& config,
                                       const DepthStructure& depth) {
  if (config.threshold_table.empty()) {
    throw InputError({"", 0, 0, "exit_policy.threshold_table"},
                     fmt::format("exit policy {} needs a threshold table (the exit distribution "
                                 "the engine measured per threshold) to be simulated",
                                 config.kind));
  }
  const policy::ExitTable table = policy::ExitTable::read(config.threshold_table);
  const std::size_t points = depth.effective_exit_points().size();
  if (table.exit_points() != points) {
    throw InputError({config.threshold_table, 0, 0, "exit_policy.threshold_table"},
                     expected_found(fmt::format("{} exit points (the model's)", points),
                                    std::to_string(table.exit_points())));
  }
  return table.exit_distribution_for(config.threshold);
}

policy::ExitLookup token_trace_lookup(const std::string& path) {
  auto exits = std::make_shared<std::map<std::pair<std::uint64_t, std::int64_t>, int>>();
  traces::TokenTraceReader reader(path);
  while (auto row = reader.next())
    (*exits)[{row->request_id, row->position}] = row->exit_point;
  return [exits](RequestId request, std::int64_t position) -> std::optional<int> {
    const auto found = exits->find({request.value, position});
    if (found == exits->end())
      return std::nullopt;
    return found->second;
  };
}

policy::ExitPolicyParams exit_params(const scenario::ExitPolicyConfig& config,
                                     const DepthStructure& depth) {
  policy::ExitPolicyParams params;
  params.kind = config.kind;
  params.threshold = config.threshold;
  params.confidence_measure = config.confidence_measure;
  params.calm_decay = config.calm_decay;
  params.router_mode = config.router_mode;
  params.capacities = config.capacities;
  params.probabilities = config.probabilities;
  for (const scenario::PositionBucket& bucket : config.position_buckets) {
    params.position_buckets.push_back({bucket.until_position, bucket.probabilities});
  }
  for (const scenario::DepthScheduleStep& step : config.schedule) {
    params.schedule.push_back({step.from_position, step.depth});
  }
  if (config.kind == "confidence" || config.kind == "oracle") {
    params.kind = "distribution";
    params.probabilities = table_distribution(config, depth);
    params.position_buckets.clear();
  } else if (config.kind == "replay") {
    params.replay_lookup = token_trace_lookup(config.token_trace);
  }
  return params;
}

}  // namespace

DepthModel::DepthModel(const scenario::ExitPolicyConfig& exit_policy,
                       const scenario::SyncConfig& sync, const ModelShape& model,
                       std::uint64_t seed, int replica)
    : full_depth_(model.depth.stacked_depth()),
      depth_(model.depth),
      strategy_(strategy_from(sync)),
      draws_(seed, fmt::format("exit.replica{}.draws", replica)),
      scores_(seed, fmt::format("exit.replica{}.scores", replica)) {
  const bool exits = exit_policy.kind != "none";
  // Shared K/V changes memory and attention work even when every token runs the full depth.
  dynamic_ = strategy_ != policy::SyncStrategy::full_depth &&
             (exits || strategy_ == policy::SyncStrategy::shared_kv);
  if (!exits)
    return;
  if (model.depth.recursions > static_cast<int>(k_max_recursion_contexts)) {
    throw InputError({"", 0, 0, "model.depth.recursions"},
                     expected_found(fmt::format("at most {} recursions for dynamic depth",
                                                k_max_recursion_contexts),
                                    std::to_string(model.depth.recursions)));
  }
  policy_ = policy::make_exit_policy(exit_params(exit_policy, model.depth), model.depth);
  scored_ = exit_policy.kind == "router_token_choice" || exit_policy.kind == "router_expert_choice";
}

int DepthModel::kv_layers() const {
  if (strategy_ == policy::SyncStrategy::shared_kv && depth_.recursions > 1) {
    return depth_.prelude_layers + depth_.block_layers + depth_.coda_layers;
  }
  return depth_.full_depth();
}

void DepthModel::set_recursion_contexts(BatchEntry& entry, const SequenceDepthState& state) const {
  if (strategy_ == policy::SyncStrategy::shared_kv)
    entry.reuse_first_recursion_kv = true;
  if (strategy_ != policy::SyncStrategy::skip_kv || depth_.recursions < 1)
    return;
  entry.recursion_context_count = static_cast<std::uint8_t>(depth_.recursions);
  for (int r = 0; r < depth_.recursions; ++r) {
    // Requests are at most 2^31 tokens long (the trace readers' limit), so this fits.
    entry.recursion_context[static_cast<std::size_t>(r)] =
        static_cast<std::int32_t>(state.reached[static_cast<std::size_t>(r)]);
  }
}

void DepthModel::plan_prefill(BatchEntry& entry, const SequenceDepthState& state) const {
  if (dynamic_)
    set_recursion_contexts(entry, state);
}

void DepthModel::on_prefill(SequenceDepthState& state, std::int64_t tokens) const {
  for (auto& reached : state.reached)
    reached += tokens;
}

std::int64_t DepthModel::plan(std::span<const DecodeToken> tokens, std::span<BatchEntry> batch,
                              std::span<int> exit_depths) {
  const std::size_t n = tokens.size();
  if (!dynamic_ || policy_ == nullptr) {
    for (std::size_t i = 0; i < n; ++i) {
      exit_depths[i] = full_depth_;
      if (dynamic_)
        set_recursion_contexts(batch[tokens[i].batch_index], *tokens[i].state);
    }
    return 0;
  }
  const std::size_t points = policy_->exit_points().size();
  exit_tokens_.resize(n);
  score_values_.resize(scored_ ? n * points : 0);
  scratch_.resize(n);
  exit_index_.resize(n);
  std::int64_t max_position = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::span<const double> scores;
    if (scored_) {
      for (std::size_t p = 0; p < points; ++p)
        score_values_[i * points + p] = scores_.uniform();
      scores = {score_values_.data() + i * points, points};
    }
    exit_tokens_[i] = {tokens[i].request, tokens[i].position, draws_.uniform(), scores};
    max_position = std::max(max_position, tokens[i].max_position);
  }
  policy_->choose_exits({exit_tokens_, max_position, scratch_}, exit_index_);

  pending_.resize(n);
  plans_.resize(n);
  exit_depth_.resize(n);
  const std::span<const int> exit_points = policy_->exit_points();
  for (std::size_t i = 0; i < n; ++i) {
    exit_depth_[i] = exit_points[static_cast<std::size_t>(exit_index_[i])];
    pending_[i] = tokens[i].state->pending;
  }
  policy::plan_depths(strategy_, exit_depth_, full_depth_, pending_, plans_);

  // Decided once per batch, not per token: whether entries carry recursion fields and whether
  // there are recursions to count.
  const bool contexts = strategy_ == policy::SyncStrategy::shared_kv ||
                        (strategy_ == policy::SyncStrategy::skip_kv && depth_.recursions >= 1);
  const bool recursive = depth_.block_layers > 0 && depth_.recursions > 0;
  std::int64_t fill = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const policy::DepthPlan& p = plans_[i];
    SequenceDepthState& state = *tokens[i].state;
    BatchEntry& entry = batch[tokens[i].batch_index];
    if (contexts)
      set_recursion_contexts(entry, state);
    entry.depth = p.run_depth;
    if (p.useful_depth < p.run_depth)
      entry.useful_depth = p.useful_depth;
    entry.kv_only_depth = p.kv_only_to;
    entry.pending_tokens = p.fill_tokens;
    entry.pending_from_depth = p.fill_from_depth;
    fill += p.fill_tokens;
    state.pending = pending_[i];
    // The token's K/V now exists at every recursion it ran (skip_kv's context for later tokens).
    if (recursive) {
      const int recursions_run = depth_.recursion_of_depth(p.run_depth);
      for (int r = 0; r < std::min<int>(recursions_run, k_max_recursion_contexts); ++r) {
        state.reached[static_cast<std::size_t>(r)] += 1;
      }
    }
    exit_depths[i] = p.useful_depth;
  }
  return fill;
}

}  // namespace exitsim::sim
