#pragma once

// How the paged K/V cache of one sequence is laid out, shared by both executors: which K/V
// *instance* (a layer with a cache of its own) each executed layer reads and writes, and which
// instances hold the same rows. The scheduler asks how many blocks a sequence needs for n more
// tokens (scheduler_steps.hpp); the answer comes from this layout and the rows the executor's
// K/V manager reports it holds (SequenceView::kv_row_offset), the shape TensorRT-LLM gives its
// capacity scheduler and K/V cache manager.
//
// Every instance keeps its own block table, so a sequence holds, per instance, ceil(rows /
// block_size) blocks. Under skip_kv and depthwise a token that exits keeps no K/V in the
// recursions it skipped: those instances hold fewer rows, and the sequence fewer blocks. Every
// other strategy holds (or, deferred_fill, owes and reserves) every token at every instance.

#include <array>
#include <cstdint>
#include <vector>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/policy/sync_strategy.hpp"

namespace exitsim::policy {

// Groups of instances holding the same rows: the prelude with recursion 1, each deeper
// recursion, the coda (k_max_recursion_kv_groups recursions at most).
inline constexpr std::size_t k_max_kv_groups = 10;
inline constexpr int k_max_recursion_kv_groups = 8;

// Instances per row group; a plain layout (one group of one instance) is what a scheduler that
// knows nothing of layers sees: blocks of block_size tokens.
struct KvGroups {
  std::size_t count = 1;
  std::array<std::int32_t, k_max_kv_groups> instances{1};

  std::int64_t total_instances() const;
  friend bool operator==(const KvGroups&, const KvGroups&) = default;
};

class KvLayout {
 public:
  // Throws InputError (sync.strategy) for a layout with more recursions than rows groups allow.
  KvLayout(const DepthStructure& depth, SyncStrategy strategy);

  // Instances a full-depth token writes K/V at (shared_kv stores recursion 1's only).
  int instances() const { return instances_; }
  // For executed layer `layer` in [0, full_depth()): the instance it reads.
  int instance_of(int layer) const { return instance_[static_cast<std::size_t>(layer)]; }
  // Whether it writes K/V there (shared_kv's deeper recursions only read).
  bool writes(int layer) const { return writes_[static_cast<std::size_t>(layer)] != 0; }
  // The row group of an instance, and the first instance of each group (whose rows stand for the
  // group's).
  std::size_t group_of_instance(int instance) const {
    return group_[static_cast<std::size_t>(instance)];
  }
  int first_instance_of_group(std::size_t group) const { return first_of_group_[group]; }
  const KvGroups& groups() const { return groups_; }
  // Whether instances may hold different rows (skip_kv, depthwise on a recursive model). Row
  // groups then are: 0 the prelude and recursion 1, r - 1 recursion r (r >= 2), then the coda.
  // A token that exits inside a recursion is counted in that recursion's group: groups are
  // charged for the rows of their first instance, which is at least what any of them holds.
  bool per_recursion() const { return groups_.count > 1; }

 private:
  int instances_ = 0;
  std::vector<int> instance_;
  std::vector<std::uint8_t> writes_;
  std::vector<std::size_t> group_;
  std::vector<int> first_of_group_;
  KvGroups groups_;
};

}  // namespace exitsim::policy
