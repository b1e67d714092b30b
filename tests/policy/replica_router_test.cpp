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

// The replica holding most of the prompt wins unless it is much busier than the least busy:
// at most 1.5 x its outstanding requests + 4. No hit anywhere, or a tie, goes to the least busy.
TEST(ReplicaRouter, PrefixAffinityFollowsTheCacheWithinTheBalanceBound) {
  const auto pick = [](std::vector<ReplicaLoad> loads) {
    return route_request(ReplicaRouterKind::prefix_affinity, {loads, 0});
  };
  EXPECT_EQ(pick({{4, 0, 10}, {2, 0, 0}, {3, 0, 40}}), 2u);
  // 10 least: bound 19; the replica with 40 cached blocks has 20 outstanding.
  EXPECT_EQ(pick({{10, 0, 5}, {20, 0, 40}, {12, 0, 0}}), 0u);
  EXPECT_EQ(pick({{10, 0, 5}, {19, 0, 40}, {12, 0, 0}}), 1u);
  EXPECT_EQ(pick({{3, 0, 0}, {1, 0, 0}, {2, 0, 0}}), 1u);  // no hit: least outstanding
  EXPECT_EQ(pick({{3, 0, 8}, {5, 0, 8}, {2, 0, 0}}), 0u);  // tie on blocks: the less busy
}

TEST(ReplicaRouter, NamesRoundTrip) {
  for (const std::string& name : replica_router_names()) {
    EXPECT_TRUE(parse_replica_router(name).has_value()) << name;
  }
  EXPECT_FALSE(parse_replica_router("random").has_value());
}

}  // namespace
}  // namespace exitsim::policy
