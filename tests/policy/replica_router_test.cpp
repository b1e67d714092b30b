#include "exitsim/policy/replica_router.hpp"

#include <gtest/gtest.h>

namespace exitsim::policy {
namespace {

TEST(ReplicaRouter, RoundRobinCyclesThroughReplicas) {
  const std::vector<ReplicaLoad> loads(3);
  std::vector<std::size_t> picks;
  for (std::uint64_t i = 0; i < 7; ++i) {
    picks.push_back(route_request(ReplicaRouterKind::round_robin, {loads, i}));
  }
  EXPECT_EQ(picks, (std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(ReplicaRouter, LeastOutstandingPicksFewestRequestsLowestIndexOnTie) {
  const std::vector<ReplicaLoad> loads = {{4, 10}, {2, 900}, {2, 5}};
  EXPECT_EQ(route_request(ReplicaRouterKind::least_outstanding, {loads, 0}), 1u);
}

TEST(ReplicaRouter, ShortestQueueByTokensIgnoresRequestCount) {
  const std::vector<ReplicaLoad> loads = {{1, 5000}, {9, 100}, {3, 400}};
  EXPECT_EQ(route_request(ReplicaRouterKind::shortest_queue_tokens, {loads, 0}), 1u);
}

TEST(ReplicaRouter, NamesRoundTrip) {
  for (const std::string& name : replica_router_names()) {
    EXPECT_TRUE(parse_replica_router(name).has_value()) << name;
  }
  EXPECT_FALSE(parse_replica_router("random").has_value());
}

}  // namespace
}  // namespace exitsim::policy
