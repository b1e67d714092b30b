#pragma once

// What happens to tokens that exit early while the rest of the batch continues, and to the K/V
// of the layers they skipped (BRIEF.md, "Synchronization / missing-KV strategies"). The plan is
// a pure function of the batch's exit depths and each sequence's pending-fill state, so the
// engine and the simulator execute the same plan.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::policy {

enum class SyncStrategy : std::uint8_t {
  full_depth,     // nobody exits: the baseline
  batch_sync,     // exited tokens ride along masked until the deepest token of the batch is done
  state_copy,     // CALM: exited tokens leave; skipped layers compute K/V from the copied state
  deferred_fill,  // FREE: skipped layers wait; the next deep token fills them at query m+1
  skip_kv,        // MoR recursion-wise caching: no K/V at recursions a token did not reach
  shared_kv,      // MoR recursive sharing: first-recursion K/V reused at deeper recursions
  // RRT continuous depth-wise batching: one block call runs tokens at mixed recursion indices
  // (policy/depthwise.hpp steps them); exited tokens keep no deeper K/V, as under skip_kv.
  depthwise,
};

std::optional<SyncStrategy> parse_sync_strategy(std::string_view name);
std::string_view to_string(SyncStrategy strategy);
std::vector<std::string> sync_strategy_names();

// Per sequence, what deferred_fill still owes: hidden states of tokens that exited before the
// full depth, whose deeper K/V is missing until a later token of the sequence goes deep.
struct PendingFill {
  std::int64_t tokens = 0;  // stacked hidden states
  int from_depth = 0;       // the shallowest depth among them: the fill starts above it

  friend bool operator==(const PendingFill&, const PendingFill&) = default;
};

// One emitting token's share of the iteration, as the strategy plans it.
struct DepthPlan {
  int run_depth = 0;     // layers of the stack the token is carried through (timed)
  int useful_depth = 0;  // layers whose output it uses (= its exit depth); the rest is masked
  int kv_only_to = 0;    // state_copy: K/V projections of layers (run_depth, kv_only_to]
  // deferred_fill: pending hidden states that run layers (fill_from_depth, run_depth] with this
  // token (query length fill_tokens + 1 there); 0 = no fill.
  std::int64_t fill_tokens = 0;
  int fill_from_depth = 0;

  friend bool operator==(const DepthPlan&, const DepthPlan&) = default;
};

// Plans the batch: `exit_depths[i]` is token i's exit depth (from the exit policy, in executed
// layers of the stack), `pending[i]` its sequence's deferred-fill state, which the function
// updates (a shallow exit stacks one more state; a deep token clears the stack by filling it).
// `full_depth` is the stack's depth. Allocation-free. Depth-wise batching runs one recursion per
// step rather than a token's whole depth per iteration; as a per-iteration plan it is skip_kv's.
void plan_depths(SyncStrategy strategy, std::span<const int> exit_depths, int full_depth,
                 std::span<PendingFill> pending, std::span<DepthPlan> out);

}  // namespace exitsim::policy
