#pragma once

// What happens to tokens that exit early while the rest of the batch continues, and to the K/V
// of the layers they skipped (BRIEF.md, "Synchronization / missing-KV strategies"). The plan is
// a pure function of the batch's exit depths and each sequence's pending-fill state. The
// simulator prices the whole plan of each token (plan_token_depth); the engine, whose exits are
// decided while the layers run, asks the plan of the exits known so far what each layer does
// (plan_so_far, then DepthPlan::runs_at, masked_at, kv_only_at, fill_tokens_at) and does just
// that: its decode pass names no strategy. A new sequence-wise strategy changes this library, and
// an executor only where it needs physical work no strategy has asked for yet.

#include <array>
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

// deferred_fill: hidden states of tokens that exited early, whose deeper K/V is missing, grouped
// by the depth they have reached. A later token of the sequence that goes deeper than a group
// takes its states along: they join its rows at the layers above their depth and rise to its
// depth with it (the engine runs them in the same layer calls, as one query of the group's
// states plus the token). States that reach the top have their K/V complete; the others wait
// at the token's depth. Each state so runs every layer exactly once, as early as a deeper token
// allows, and a deep token attends over exact K/V of every earlier token at every layer it runs.
inline constexpr std::size_t k_max_fill_groups = 15;

struct FillGroup {
  std::int32_t tokens = 0;
  std::int32_t depth = 0;  // stack layers its states have run

  friend bool operator==(const FillGroup&, const FillGroup&) = default;
};

// One sequence's pending states: groups ordered oldest first, with strictly decreasing depths
// (a deeper token lifts every shallower group to its own depth, so an older group is never
// shallower than a newer one). At most one group per exit point below the full depth. The
// groups past `count` are clear (plan_depths clears each group it pops), so that equal states
// compare equal.
struct PendingFill {
  std::array<FillGroup, k_max_fill_groups> groups{};
  std::uint8_t count = 0;

  std::int64_t tokens() const;
  friend bool operator==(const PendingFill&, const PendingFill&) = default;
};

// One emitting token's share of the iteration, as the strategy plans it: what each layer of the
// stack runs (0-based layers, read one at a time by the *_at queries). Layer l runs the token
// when l < run_depth; its output is masked when useful_depth <= l < run_depth; it computes only
// K/V from the exit state when run_depth <= l < kv_only_to; fill group k's states join it at
// layers fills[k].depth <= l < run_depth.
struct DepthPlan {
  int run_depth = 0;     // layers of the stack the token is carried through (timed)
  int useful_depth = 0;  // layers whose output it uses (= its exit depth); the rest is masked
  int kv_only_to = 0;    // state_copy: K/V projections of layers run_depth .. kv_only_to - 1
  // deferred_fill: the pending groups that join this token, shallowest (newest) first; a group's
  // depth is the layer at which its states join.
  std::array<FillGroup, k_max_fill_groups> fills{};
  std::uint8_t fill_count = 0;
  bool fills_complete = false;  // the joined states reach the top (their K/V is complete)
  // deferred_fill: the token stops below the top, so its exit state joins its sequence's pending
  // states (with the joined states that stop with it) and waits for a deeper token.
  bool exit_state_waits = false;

  // Layer `layer` computes the token's row (masked or not).
  bool runs_at(int layer) const { return layer < run_depth; }
  // Layer `layer` computes the token's row but the token does not use its output (it rides
  // along past its exit; its exit state must be kept apart).
  bool masked_at(int layer) const { return layer >= useful_depth && layer < run_depth; }
  // Layer `layer` computes only the token's K/V, from its exit state.
  bool kv_only_at(int layer) const { return layer >= run_depth && layer < kv_only_to; }
  std::int64_t fill_tokens() const;  // states that join
  // Token-layers of fill work: each joined state times the layers it runs.
  std::int64_t fill_layers() const;
  // States running with the token at layer `layer` (0-based): those of groups whose depth is at
  // most it, the newest states of the sequence (groups are joined shallowest first).
  std::int64_t fill_tokens_at(int layer) const;
  // Copies `other`'s fields and its used fill groups only (the hot path's copy).
  void assign_used(const DepthPlan& other);
  // Entries of `fills` past fill_count are unspecified (plans are reused without clearing) and
  // never compared.
  friend bool operator==(const DepthPlan& a, const DepthPlan& b);
};

// Plans the batch: `exit_depths[i]` is token i's exit depth (from the exit policy, in executed
// layers of the stack), `pending[i]` its sequence's deferred-fill state, which the function
// updates (`pending` may be empty for every other strategy). `full_depth` is the stack's depth.
// Allocation-free. Depth-wise batching runs one recursion per step rather than a token's whole
// depth per iteration; as a per-iteration plan it is skip_kv's. The simulator prices this plan;
// the engine reports what it executed, which the conformance suite holds to it field by field.
void plan_depths(SyncStrategy strategy, std::span<const int> exit_depths, int full_depth,
                 std::span<PendingFill> pending, std::span<DepthPlan> out);

// An exit depth not known yet: the token is still running when the layer asked about starts.
inline constexpr int k_still_running = -1;

// The batch's plan as far as it is known when a layer starts, for an executor whose exits are
// decided while the layers run (confidences, routers): `exits_so_far[i]` is token i's exit depth
// once it has exited (at most the layer about to run), k_still_running before; `pending` holds the
// sequences' deferred-fill states at the start of the step and is left as it is (may be empty for
// every strategy but deferred_fill). A token still running is planned as if it went to the top.
// That changes nothing at the layer about to run: every per-layer answer at layer l (runs_at,
// masked_at, kv_only_at, fill_tokens_at) depends only on which tokens exited at or below l and
// where, so the plan so far answers layer l as the plan of the final exits will
// (SyncStrategy.ThePlanSoFarAnswersEachLayerAsTheFinalPlanDoes). Allocation-free.
void plan_so_far(SyncStrategy strategy, std::span<const int> exits_so_far, int full_depth,
                 std::span<const PendingFill> pending, std::span<DepthPlan> out);

// The batch's deepest exit depth: what batch_sync carries every token to.
int deepest_exit(std::span<const int> exit_depths);
// deferred_fill's share of plan_token_depth: the token of exit depth `exit` takes the shallower
// groups of `pending` along; if it stops short of the top, they wait with it at its depth.
void plan_deferred_fill(int exit, int full_depth, PendingFill& pending, DepthPlan& plan);
// plan_depths for one token, given deepest_exit of its batch: the same plan plan_depths gives it.
// `pending` may be null for every strategy but deferred_fill. For an executor that keeps its rows
// and pending states apart rather than in spans (the simulator's hot path, so inline).
inline void plan_token_depth(SyncStrategy strategy, int exit_depth, int deepest, int full_depth,
                             PendingFill* pending, DepthPlan& plan) {
  const int exit = strategy == SyncStrategy::full_depth ? full_depth : exit_depth;
  // Written field by field: the fill slots past fill_count are left as they were (cheap on the
  // simulator's hot path, and never read).
  plan.kv_only_to = 0;
  plan.fill_count = 0;
  plan.fills_complete = false;
  plan.exit_state_waits = false;
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
    case SyncStrategy::deferred_fill:
      plan_deferred_fill(exit, full_depth, *pending, plan);
      break;
  }
}

// Throws InputError (exit_policy.kind) for an exit policy the strategy cannot run: the oracle
// runs every token to the full depth to find its exit, which depth-wise batching cannot.
void check_exit_policy_for(SyncStrategy strategy, std::string_view exit_policy_kind);

// Throws InputError (model.depth.exit_points) when deferred_fill could need more fill groups
// than a plan holds: more than k_max_fill_groups exit points below the full depth.
void check_deferred_fill_exit_points(std::size_t exit_points);

}  // namespace exitsim::policy
