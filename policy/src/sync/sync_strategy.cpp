#include "exitsim/policy/sync_strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>

#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

constexpr std::array<std::pair<std::string_view, SyncStrategy>, 7> k_names = {{
    {"full_depth", SyncStrategy::full_depth},
    {"batch_sync", SyncStrategy::batch_sync},
    {"state_copy", SyncStrategy::state_copy},
    {"deferred_fill", SyncStrategy::deferred_fill},
    {"skip_kv", SyncStrategy::skip_kv},
    {"shared_kv", SyncStrategy::shared_kv},
    {"depthwise", SyncStrategy::depthwise},
}};

}  // namespace

std::optional<SyncStrategy> parse_sync_strategy(std::string_view name) {
  for (const auto& [text, strategy] : k_names) {
    if (text == name)
      return strategy;
  }
  return std::nullopt;
}

std::string_view to_string(SyncStrategy strategy) {
  for (const auto& [text, value] : k_names) {
    if (value == strategy)
      return text;
  }
  return "?";
}

std::vector<std::string> sync_strategy_names() {
  std::vector<std::string> names;
  for (const auto& entry : k_names)
    names.emplace_back(entry.first);
  return names;
}

std::int64_t PendingFill::tokens() const {
  std::int64_t total = 0;
  for (std::size_t g = 0; g < count; ++g)
    total += groups[g].tokens;
  return total;
}

bool operator==(const DepthPlan& a, const DepthPlan& b) {
  return a.run_depth == b.run_depth && a.useful_depth == b.useful_depth &&
         a.kv_only_to == b.kv_only_to && a.fill_count == b.fill_count &&
         a.fills_complete == b.fills_complete && a.exit_state_waits == b.exit_state_waits &&
         std::equal(a.fills.begin(), a.fills.begin() + a.fill_count, b.fills.begin());
}

void DepthPlan::assign_used(const DepthPlan& other) {
  run_depth = other.run_depth;
  useful_depth = other.useful_depth;
  kv_only_to = other.kv_only_to;
  fill_count = other.fill_count;
  fills_complete = other.fills_complete;
  exit_state_waits = other.exit_state_waits;
  std::copy_n(other.fills.begin(), other.fill_count, fills.begin());
}

std::int64_t DepthPlan::fill_tokens() const {
  std::int64_t total = 0;
  for (std::size_t g = 0; g < fill_count; ++g)
    total += fills[g].tokens;
  return total;
}

std::int64_t DepthPlan::fill_layers() const {
  std::int64_t total = 0;
  for (std::size_t g = 0; g < fill_count; ++g)
    total += static_cast<std::int64_t>(fills[g].tokens) * (run_depth - fills[g].depth);
  return total;
}

std::int64_t DepthPlan::fill_tokens_at(int layer) const {
  std::int64_t total = 0;
  if (layer >= run_depth)
    return 0;
  for (std::size_t g = 0; g < fill_count; ++g) {
    if (fills[g].depth <= layer)
      total += fills[g].tokens;
  }
  return total;
}

void plan_deferred_fill(int exit, int full_depth, PendingFill& stack, DepthPlan& plan) {
  std::int32_t joined = 0;
  // Popped groups are cleared, so equal pending states compare equal (the slots past the count
  // are all clear, as a new state's are).
  while (stack.count > 0 && stack.groups[stack.count - 1].depth < exit) {
    FillGroup& top = stack.groups[--stack.count];
    plan.fills[plan.fill_count++] = top;
    joined += top.tokens;
    top = FillGroup{};
  }
  if (exit >= full_depth) {
    plan.fills_complete = plan.fill_count > 0;
    return;
  }
  plan.exit_state_waits = true;
  if (stack.count > 0 && stack.groups[stack.count - 1].depth == exit) {
    stack.groups[stack.count - 1].tokens += joined + 1;
  } else {
    assert(stack.count < k_max_fill_groups);
    stack.groups[stack.count++] = {joined + 1, exit};
  }
}

void check_exit_policy_for(SyncStrategy strategy, std::string_view exit_policy_kind) {
  if (strategy == SyncStrategy::depthwise && exit_policy_kind == "oracle") {
    throw InputError({"", 0, 0, "exit_policy.kind"},
                     "the oracle exit policy runs every token to the full depth to find its "
                     "exit; depthwise batching cannot, use a sequence-wise strategy");
  }
}

void check_deferred_fill_exit_points(std::size_t exit_points) {
  if (exit_points > k_max_fill_groups + 1) {
    throw InputError({"", 0, 0, "model.depth.exit_points"},
                     expected_found(fmt::format("at most {} exit points for deferred_fill",
                                                k_max_fill_groups + 1),
                                    std::to_string(exit_points)));
  }
}

int deepest_exit(std::span<const int> exit_depths) {
  int deepest = 0;
  for (int depth : exit_depths)
    deepest = std::max(deepest, depth);
  return deepest;
}

void plan_depths(SyncStrategy strategy, std::span<const int> exit_depths, int full_depth,
                 std::span<PendingFill> pending, std::span<DepthPlan> out) {
  assert(exit_depths.size() == out.size());
  assert(pending.size() == out.size() || strategy != SyncStrategy::deferred_fill);
  const int deepest = deepest_exit(exit_depths);
  for (std::size_t i = 0; i < out.size(); ++i) {
    plan_token_depth(strategy, exit_depths[i], deepest, full_depth,
                     i < pending.size() ? &pending[i] : nullptr, out[i]);
  }
}

void plan_so_far(SyncStrategy strategy, std::span<const int> exits_so_far, int full_depth,
                 std::span<const PendingFill> pending, std::span<DepthPlan> out) {
  assert(exits_so_far.size() == out.size());
  assert(pending.size() == out.size() || strategy != SyncStrategy::deferred_fill);
  // A token still running may go to the top: batch_sync carries everyone that far for now.
  int deepest = 0;
  for (const int exit : exits_so_far)
    deepest = std::max(deepest, exit == k_still_running ? full_depth : exit);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int exit = exits_so_far[i] == k_still_running ? full_depth : exits_so_far[i];
    // plan_token_depth pops the groups that join; the step's own state stays as it was.
    PendingFill groups = i < pending.size() ? pending[i] : PendingFill{};
    plan_token_depth(strategy, exit, deepest, full_depth, &groups, out[i]);
  }
}

}  // namespace exitsim::policy
