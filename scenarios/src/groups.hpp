#pragma once

#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"
#include "resolve.hpp"
#include "tree.hpp"

namespace exitsim::scenario::detail {

// Fills s.replica_groups from cluster.groups: each group is the document `root` with the group's
// `set` overrides applied, resolved and checked as a whole scenario; s.cluster.replicas becomes
// the sum of the counts. Without groups, one group of cluster.replicas with the top-level
// sections. Throws InputError naming cluster.groups[i] or cluster.groups[i].set[j].
void resolve_replica_groups(Scenario& s, const Resolution& r, const Node& root,
                            const std::string& source);

// The overrides that turn `base`'s sections into `group`'s, in the canonical form kept in
// ReplicaGroup::overrides and rendered: applied to the rendered base (every key explicit,
// presets expanded) they give `group` exactly, which the user's own assignments may not (a
// preset named there would be shadowed by the base's expanded shape keys).
std::vector<std::string> canonical_overrides(const Scenario& base, const ReplicaGroup& group);

}  // namespace exitsim::scenario::detail
