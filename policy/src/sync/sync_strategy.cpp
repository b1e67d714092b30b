#include "exitsim/policy/sync_strategy.hpp"

#include <algorithm>
#include <array>
#include <cassert>

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

void plan_depths(SyncStrategy strategy, std::span<const int> exit_depths, int full_depth,
                 std::span<PendingFill> pending, std::span<DepthPlan> out) {
  assert(exit_depths.size() == out.size() && pending.size() == out.size());
  int deepest = 0;
  for (int depth : exit_depths)
    deepest = std::max(deepest, depth);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int exit = strategy == SyncStrategy::full_depth ? full_depth : exit_depths[i];
    DepthPlan plan;
    plan.useful_depth = exit;
    plan.run_depth = exit;
    switch (strategy) {
      case SyncStrategy::full_depth:
      case SyncStrategy::skip_kv:
      case SyncStrategy::shared_kv:
      case SyncStrategy::depthwise:
        break;
      case SyncStrategy::batch_sync:
        plan.run_depth = deepest;
        break;
      case SyncStrategy::state_copy:
        plan.kv_only_to = exit < full_depth ? full_depth : 0;
        break;
      case SyncStrategy::deferred_fill: {
        PendingFill& stack = pending[i];
        if (exit < full_depth) {
          stack.from_depth = stack.tokens == 0 ? exit : std::min(stack.from_depth, exit);
          stack.tokens += 1;
        } else if (stack.tokens > 0) {
          plan.fill_tokens = stack.tokens;
          plan.fill_from_depth = stack.from_depth;
          stack = PendingFill{};
        }
        break;
      }
    }
    out[i] = plan;
  }
}

}  // namespace exitsim::policy
