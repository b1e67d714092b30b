// A cluster of replicas that differ (replica groups): built in group order, conserving requests
// and tokens, with the router steering load toward the faster hardware.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/test_files.hpp"

namespace exitsim::sim {
namespace {

using test_support::read_file;
using test_support::TempDir;

// One L40S replica, then one H100: the slower one first, so that routing ties (which go to the
// lowest index) favour it and cannot explain the H100 taking more requests.
scenario::Scenario mixed_fleet(const std::string& router) {
  const std::vector<std::string> set = {
      "cluster.router=" + router,
      R"(cluster.groups=[{set: ["hardware.preset=l40s"]}, {set: ["hardware.preset=h100-sxm"]}])",
      "workload.requests=1500",
      "workload.arrivals.rate=12",
  };
  return scenario::load_default_scenario(set);
}

SimulationResult run(const SimulationConfig& config, const scenario::Scenario& s) {
  const auto workload = make_workload(s.workload, s.seed);
  return simulate(config, *workload);
}

void expect_conserved(const SimulationResult& r) {
  EXPECT_GT(r.totals.requests_arrived, 0);
  EXPECT_EQ(r.totals.requests_finished, r.totals.requests_arrived);
  EXPECT_EQ(r.totals.tokens_emitted, r.totals.tokens_expected);
  EXPECT_EQ(r.totals.kv_blocks_leaked, 0);
}

// Requests served by each replica, from the `replica` column of requests.csv.
std::vector<int> requests_per_replica(const std::string& csv, std::size_t replicas) {
  std::vector<int> counts(replicas, 0);
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    const auto first = line.find(',');
    const auto second = line.find(',', first + 1);
    counts.at(std::stoul(line.substr(first + 1, second - first - 1))) += 1;
  }
  return counts;
}

TEST(ReplicaGroups, ReplicasFollowTheGroupsInOrder) {
  const std::vector<std::string> set = {
      R"(cluster.groups=[{count: 2}, {count: 1, set: ["hardware.preset=l40s",
         "scheduler.kind=chunked_prefill", "scheduler.max_batched_tokens=2048"]}])"};
  const SimulationConfig config = simulation_config_from(scenario::load_default_scenario(set), "");
  ASSERT_EQ(config.replicas.size(), 3u);
  for (std::size_t r : {0u, 1u}) {
    EXPECT_EQ(config.replicas[r].hardware.name, "h100-sxm");
    EXPECT_EQ(config.replicas[r].scheduler.kind, "continuous");
  }
  EXPECT_EQ(config.replicas[2].hardware.name, "l40s");
  EXPECT_EQ(config.replicas[2].scheduler.kind, "chunked_prefill");
  EXPECT_EQ(config.replicas[2].scheduler.max_batched_tokens, 2048);
}

TEST(ReplicaGroups, MixedFleetConservesRequestsAndTokens) {
  const scenario::Scenario s = mixed_fleet("shortest_queue_tokens");
  expect_conserved(run(simulation_config_from(s, ""), s));
}

TEST(ReplicaGroups, FasterReplicaServesMoreRequests) {
  const scenario::Scenario s = mixed_fleet("least_outstanding");
  TempDir dir;
  SimulationConfig config = simulation_config_from(s, "");
  config.requests_csv_path = dir.path("requests.csv");
  const SimulationResult r = run(config, s);
  expect_conserved(r);
  const std::vector<int> counts = requests_per_replica(read_file(config.requests_csv_path), 2);
  EXPECT_EQ(counts[0] + counts[1], r.totals.requests_finished);
  // The H100 has ~2.7x the compute and ~3.9x the memory bandwidth of the L40S, so it finishes
  // requests sooner, has fewer outstanding, and is picked more often.
  EXPECT_GT(counts[1], counts[0] * 5 / 4) << "L40S " << counts[0] << ", H100 " << counts[1];
}

}  // namespace
}  // namespace exitsim::sim
