#include "exitsim/policy/replica_router.hpp"

#include <cassert>

namespace exitsim::policy {
namespace {

template <typename Key>
std::size_t argmin(std::span<const ReplicaLoad> replicas, Key key) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < replicas.size(); ++i) {
    if (key(replicas[i]) < key(replicas[best]))
      best = i;
  }
  return best;
}

std::size_t route_by_prefix(std::span<const ReplicaLoad> replicas) {
  const std::size_t least =
      argmin(replicas, [](const ReplicaLoad& r) { return r.outstanding_requests; });
  const double bound =
      static_cast<double>(replicas[least].outstanding_requests) * k_affinity_load_factor +
      static_cast<double>(k_affinity_load_slack);
  std::size_t best = least;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    const ReplicaLoad& r = replicas[i];
    if (static_cast<double>(r.outstanding_requests) > bound)
      continue;
    const ReplicaLoad& b = replicas[best];
    if (r.cached_prefix_blocks > b.cached_prefix_blocks ||
        (r.cached_prefix_blocks == b.cached_prefix_blocks &&
         r.outstanding_requests < b.outstanding_requests)) {
      best = i;
    }
  }
  return best;
}

}  // namespace

std::optional<ReplicaRouterKind> parse_replica_router(std::string_view name) {
  if (name == "round_robin")
    return ReplicaRouterKind::round_robin;
  if (name == "least_outstanding")
    return ReplicaRouterKind::least_outstanding;
  if (name == "shortest_queue_tokens")
    return ReplicaRouterKind::shortest_queue_tokens;
  if (name == "prefix_affinity")
    return ReplicaRouterKind::prefix_affinity;
  return std::nullopt;
}

std::vector<std::string> replica_router_names() {
  return {"round_robin", "least_outstanding", "shortest_queue_tokens", "prefix_affinity"};
}

std::size_t route_request(ReplicaRouterKind kind, const RouterSnapshot& snapshot) {
  assert(!snapshot.replicas.empty());
  switch (kind) {
    case ReplicaRouterKind::round_robin:
      return static_cast<std::size_t>(snapshot.requests_routed_so_far % snapshot.replicas.size());
    case ReplicaRouterKind::least_outstanding:
      return argmin(snapshot.replicas, [](const ReplicaLoad& r) { return r.outstanding_requests; });
    case ReplicaRouterKind::shortest_queue_tokens:
      return argmin(snapshot.replicas, [](const ReplicaLoad& r) { return r.outstanding_tokens; });
    case ReplicaRouterKind::prefix_affinity:
      return route_by_prefix(snapshot.replicas);
  }
  return 0;
}

}  // namespace exitsim::policy
