#include "exitsim/policy/kv_layout.hpp"

#include <fmt/format.h>

#include "exitsim/core/error.hpp"

namespace exitsim::policy {

std::int64_t KvGroups::total_instances() const {
  std::int64_t total = 0;
  for (std::size_t g = 0; g < count; ++g)
    total += instances[g];
  return total;
}

KvLayout::KvLayout(const DepthStructure& depth, SyncStrategy strategy) {
  const int layers = depth.full_depth();
  const bool recursive = depth.recursions > 0 && depth.block_layers > 0;
  const bool shared = strategy == SyncStrategy::shared_kv && depth.recursions > 1;
  const bool per_recursion =
      (strategy == SyncStrategy::skip_kv || strategy == SyncStrategy::depthwise) && recursive &&
      depth.recursions > 1;
  if (per_recursion && depth.recursions > k_max_recursion_kv_groups) {
    throw InputError({"", 0, 0, "model.depth.recursions"},
                     expected_found(fmt::format("at most {} recursions for {}",
                                                k_max_recursion_kv_groups, to_string(strategy)),
                                    std::to_string(depth.recursions)));
  }
  instance_.resize(static_cast<std::size_t>(layers));
  writes_.resize(static_cast<std::size_t>(layers), 1);
  std::vector<std::size_t> group_of_layer(static_cast<std::size_t>(layers), 0);
  const std::size_t coda_group = per_recursion ? static_cast<std::size_t>(depth.recursions) : 0;
  int next = 0;
  for (int e = 0; e < layers; ++e) {
    const auto layer = static_cast<std::size_t>(e);
    const int in_stack = e - depth.prelude_layers;
    const bool in_block = in_stack >= 0 && in_stack < depth.block_layers * depth.recursions;
    const bool deeper_recursion = in_block && in_stack >= depth.block_layers;
    if (shared && deeper_recursion) {
      instance_[layer] =
          instance_[static_cast<std::size_t>(depth.prelude_layers + in_stack % depth.block_layers)];
      writes_[layer] = 0;
      continue;
    }
    instance_[layer] = next++;
    if (per_recursion && in_block)
      group_of_layer[layer] = static_cast<std::size_t>(in_stack / depth.block_layers);
    else if (per_recursion && in_stack >= 0)
      group_of_layer[layer] = coda_group;
    group_.push_back(group_of_layer[layer]);
  }
  instances_ = next;
  groups_.count = per_recursion ? coda_group + (depth.coda_layers > 0 ? 1 : 0) : 1;
  groups_.instances.fill(0);
  first_of_group_.assign(groups_.count, -1);
  for (int i = 0; i < instances_; ++i) {
    const std::size_t g = group_[static_cast<std::size_t>(i)];
    groups_.instances[g] += 1;
    if (first_of_group_[g] < 0)
      first_of_group_[g] = i;
  }
}

}  // namespace exitsim::policy
