#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace exitsim::policy {

// What the global router may look at: per replica, the load it currently carries.
struct ReplicaLoad {
  std::int64_t outstanding_requests = 0;  // admitted to the replica and not yet finished
  std::int64_t outstanding_tokens = 0;    // prompt tokens not yet prefilled + output tokens to go
  // For the request being routed: its prompt's leading blocks the replica has in its prefix
  // cache (prefix_affinity; 0 without prefix caching).
  std::int64_t cached_prefix_blocks = 0;
};

// prefix_affinity's balance bound: a replica may take a request for its cached prefix while its
// outstanding requests are at most this factor times the least busy replica's, plus the slack.
inline constexpr double k_affinity_load_factor = 1.5;
inline constexpr std::int64_t k_affinity_load_slack = 4;

struct RouterSnapshot {
  std::span<const ReplicaLoad> replicas;
  std::uint64_t requests_routed_so_far = 0;  // round-robin position, kept by the executor
};

enum class ReplicaRouterKind : std::uint8_t {
  round_robin,
  least_outstanding,
  shortest_queue_tokens,
  // The replica with the most cached prefix blocks among those within the balance bound; ties
  // and no hit anywhere go to the fewest outstanding requests (SGLang's cache-aware routing,
  // simplified).
  prefix_affinity
};

std::optional<ReplicaRouterKind> parse_replica_router(std::string_view name);
std::vector<std::string> replica_router_names();

// The replica the next request goes to. Ties go to the lowest index, so the choice is
// deterministic. Precondition: at least one replica.
std::size_t route_request(ReplicaRouterKind kind, const RouterSnapshot& snapshot);

}  // namespace exitsim::policy
