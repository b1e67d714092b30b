// Replica groups: each group is the scenario with its `set` overrides applied, resolved by the
// same schema as --set, and rendered so that loading the rendered text gives the same scenario.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/presets.hpp"
#include "exitsim/scenario/load.hpp"

namespace exitsim::scenario {
namespace {

void expect_round_trip(const Scenario& s) {
  const std::string text = render_resolved_yaml(s);
  const Scenario again = load_scenario_text(text, "<rendered>");
  EXPECT_TRUE(again == s) << text;
  EXPECT_EQ(render_resolved_yaml(again), text);
}

constexpr const char* k_mixed = R"(
cluster:
  router: least_outstanding
  groups:
    - count: 2
    - count: 1
      set: ["hardware.preset=a100-80gb", "scheduler.kind=chunked_prefill",
            "scheduler.max_batched_tokens=2048"]
)";

TEST(ReplicaGroups, EachGroupIsTheScenarioWithItsOverrides) {
  const Scenario s = load_scenario_text(k_mixed, "mixed.yaml");
  EXPECT_EQ(s.cluster.replicas, 3);
  EXPECT_EQ(s.cluster.router, "least_outstanding");
  ASSERT_EQ(s.replica_groups.size(), 2u);

  const ReplicaGroup& same = s.replica_groups[0];
  EXPECT_EQ(same.count, 2);
  EXPECT_TRUE(same.model == s.model);
  EXPECT_TRUE(same.hardware == s.hardware);
  EXPECT_TRUE(same.cost_model == s.cost_model);
  EXPECT_TRUE(same.scheduler == s.scheduler);
  EXPECT_TRUE(same.overrides.empty());

  const ReplicaGroup& a100 = s.replica_groups[1];
  EXPECT_EQ(a100.count, 1);
  EXPECT_EQ(a100.hardware.preset, "a100-80gb");
  EXPECT_TRUE(a100.hardware.spec == *find_hardware_preset("a100-80gb"));
  EXPECT_EQ(a100.scheduler.kind, "chunked_prefill");
  EXPECT_EQ(a100.scheduler.max_batched_tokens, 2048);
  EXPECT_EQ(a100.scheduler.max_running, s.scheduler.max_running);
  EXPECT_TRUE(a100.model == s.model);
  // The top-level sections stay the scenario as written.
  EXPECT_EQ(s.hardware.preset, "h100-sxm");
  EXPECT_EQ(s.scheduler.kind, "continuous");
  // Canonical overrides: a section that is exactly a preset says so.
  EXPECT_EQ(a100.overrides, (std::vector<std::string>{"hardware={preset: a100-80gb}",
                                                      "scheduler.kind=chunked_prefill",
                                                      "scheduler.max_batched_tokens=2048"}));
  expect_round_trip(s);
}

TEST(ReplicaGroups, WithoutGroupsOneGroupHoldsEveryReplica) {
  const std::vector<std::string> set = {"cluster.replicas=3"};
  const Scenario s = load_default_scenario(set);
  ASSERT_EQ(s.replica_groups.size(), 1u);
  const ReplicaGroup& g = s.replica_groups.front();
  EXPECT_EQ(g.count, 3);
  EXPECT_TRUE(g.model == s.model);
  EXPECT_TRUE(g.hardware == s.hardware);
  EXPECT_TRUE(g.cost_model == s.cost_model);
  EXPECT_TRUE(g.scheduler == s.scheduler);
  EXPECT_TRUE(g.overrides.empty());
  EXPECT_NE(render_resolved_yaml(s).find("  replicas: 3\n"), std::string::npos);
  EXPECT_NE(render_resolved_yaml(s).find("  groups: []\n"), std::string::npos);
}

TEST(ReplicaGroups, GroupsFromTheCommandLine) {
  // The default file gives cluster.replicas; setting groups replaces it.
  const std::vector<std::string> set = {
      R"(cluster.groups=[{count: 1}, {count: 2, set: ["hardware.preset=h200"]}])"};
  const Scenario s = load_default_scenario(set);
  EXPECT_EQ(s.cluster.replicas, 3);
  ASSERT_EQ(s.replica_groups.size(), 2u);
  EXPECT_EQ(s.replica_groups[0].hardware.preset, "h100-sxm");
  EXPECT_EQ(s.replica_groups[1].count, 2);
  EXPECT_EQ(s.replica_groups[1].hardware.preset, "h200");
  EXPECT_EQ(s.replica_groups[1].hardware.spec.memory_bytes, std::int64_t{141'000'000'000});
  expect_round_trip(s);
}

TEST(ReplicaGroups, SettingReplicasReplacesGroups) {
  const std::vector<std::string> set = {"cluster.replicas=5"};
  const Scenario s = load_scenario_text(k_mixed, "mixed.yaml", set);
  EXPECT_EQ(s.cluster.replicas, 5);
  ASSERT_EQ(s.replica_groups.size(), 1u);
  EXPECT_EQ(s.replica_groups[0].count, 5);
}

TEST(ReplicaGroups, GroupsWithoutOverridesKeepTheirShape) {
  const Scenario s =
      load_scenario_text("cluster:\n  groups: [{count: 2}, {}]\n", "plain_groups.yaml");
  EXPECT_EQ(s.cluster.replicas, 3);
  ASSERT_EQ(s.replica_groups.size(), 2u);
  EXPECT_EQ(s.replica_groups[1].count, 1);  // count defaults to 1
  expect_round_trip(s);
}

TEST(ReplicaGroups, OverridesAreCanonicalAndRoundTrip) {
  struct Case {
    const char* name;
    const char* yaml;
    std::vector<std::string> overrides;
  };
  const std::vector<Case> cases = {
      {"field of a preset",
       "model: {preset: llama-3-8b}\nhardware: {preset: h100-sxm}\n"
       "cluster: {groups: [{set: [\"hardware.memory_gib=40\", \"model.n_kv_heads=4\"]}]}\n",
       {"model.n_kv_heads=4", "hardware.memory_gib=40"}},
      {"kind gaining keys",
       "cluster: {groups: [{set: [\"cost_model={kind: table, profile: costs.csv}\"]}]}\n",
       {"cost_model={kind: table, profile: costs.csv, price_scale: 1, timing_scope: whole_step}"}},
      {"kind losing keys",
       "cost_model: {kind: calibrated, profile: fit.json}\n"
       "cluster: {groups: [{count: 2}, {set: [\"cost_model={flops_efficiency: 0.5}\"]}]}\n",
       {"cost_model={kind: roofline, price_scale: 1, timing_scope: whole_step, "
        "flops_efficiency: 0.5, bandwidth_efficiency: 0.85}"}},
      {"model preset",
       "cluster: {groups: [{}, {set: [\"model.preset=smollm-135m\", "
       "\"scheduler.max_running=64\"]}]}\n",
       {"model={preset: smollm-135m}", "scheduler.max_running=64"}},
      {"override equal to the scenario",
       "cluster: {groups: [{count: 4, set: [\"scheduler.max_running=256\"]}]}\n",
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Scenario s = load_scenario_text(c.yaml, "g.yaml");
    EXPECT_EQ(s.replica_groups.back().overrides, c.overrides);
    expect_round_trip(s);
  }
}

TEST(ReplicaGroups, ExampleResolvesAsDescribed) {
  ::setenv("EXITSIM_TRACES", "/traces", 0);  // the trace examples name their folder by it
  const Scenario s =
      load_scenario_file(std::string(EXITSIM_SOURCE_DIR) + "/scenarios/examples/mixed_fleet.yaml");
  EXPECT_EQ(s.cluster.replicas, 4);
  EXPECT_EQ(s.cluster.router, "shortest_queue_tokens");
  ASSERT_EQ(s.replica_groups.size(), 2u);
  EXPECT_EQ(s.replica_groups[0].hardware.preset, "h100-sxm");
  EXPECT_EQ(s.replica_groups[1].hardware.preset, "a100-80gb");
  EXPECT_DOUBLE_EQ(s.workload.trace.rate_scale, 4.0);
}

TEST(ReplicaGroups, SweepPointsResolveEveryGroup) {
  // Each sweep value is checked with the groups in place: a recursive-only strategy breaks
  // the group whose model is plain, even though the top-level model is recursive.
  const char* yaml = R"(
model:
  preset: smollm-360m
  depth: {prelude: 1, block: 10, recursions: 3, coda: 1}
cluster:
  groups:
    - count: 1
    - count: 1
      set: ["model={preset: smollm-360m}"]
sweep:
  - key: sync.strategy
    values: [batch_sync, depthwise]
)";
  try {
    load_scenario_text(yaml, "s.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "s.yaml:12:26: sweep[0].values[1]: with sync.strategy = depthwise: "
                 "cluster.groups[1]: sync.strategy: depthwise needs a recursive model; "
                 "model.depth.recursions is 0");
  }
}

}  // namespace
}  // namespace exitsim::scenario

namespace exitsim::scenario {
namespace {

std::string load_error(const std::string& yaml, const std::vector<std::string>& set) {
  try {
    load_scenario_text(yaml, "s.yaml", set);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// A 70B-class model needs several GPUs per replica: groups may differ in parallel.tensor, the
// hardware presets carry their links, and both survive rendering.
TEST(ParallelReplicas, GroupsMayDifferInTensorParallelismAndRoundTrip) {
  const Scenario s = load_scenario_text(R"(
parallel:
  tensor: 2
cluster:
  groups:
    - count: 2
    - count: 1
      set: ["hardware.preset=l40s", "parallel.tensor=4"]
)",
                                        "tp.yaml");
  EXPECT_EQ(s.parallel.tensor, 2);
  ASSERT_EQ(s.replica_groups.size(), 2U);
  EXPECT_EQ(s.replica_groups[0].parallel.tensor, 2);
  EXPECT_EQ(s.replica_groups[1].parallel.tensor, 4);
  EXPECT_EQ(s.replica_groups[1].hardware.spec.interconnect.link_bandwidth, 32e9);
  EXPECT_EQ(s.hardware.spec.interconnect.link_bandwidth, 450e9);
  EXPECT_EQ(s.hardware.spec.interconnect.gpus_per_node, 8);
  EXPECT_EQ(s.replica_groups[1].overrides,
            (std::vector<std::string>{"hardware={preset: l40s}", "parallel.tensor=4"}));
  expect_round_trip(s);
}

TEST(ParallelReplicas, ShardsTheModelCannotTakeAreRefusedNamingTheKey) {
  EXPECT_EQ(load_error("", {"parallel.tensor=3"}),
            "--set: parallel.tensor: expected a divisor of the 32 attention heads of llama-3-8b, "
            "found 3");
  EXPECT_EQ(load_error("", {"parallel.tensor=2", "hardware.link_bandwidth_gbps=0"}),
            "--set: hardware.link_bandwidth_gbps: expected a positive link bandwidth for "
            "parallel.tensor 2 and parallel.pipeline 1, found 0");
  EXPECT_EQ(load_error("parallel:\n  tensor: 16\n", {}),
            "s.yaml:2:11: parallel.tensor: expected at most the 8 GPUs of one h100-sxm node (TP "
            "all-reduces twice per layer over the node's link), found 16");
  EXPECT_EQ(
      load_error("cluster:\n  groups:\n    - set: [\"parallel.tensor=5\"]\n", {}),
      "s.yaml:3:13: cluster.groups[0]: parallel.tensor: expected a divisor of the 32 attention "
      "heads of llama-3-8b, found 5");
  EXPECT_EQ(load_error("parallel:\n  pipeline: 33\n", {}),
            "s.yaml:2:13: parallel.pipeline: expected at most the 32 layers llama-3-8b executes (a "
            "stage holds at least one), found 33");
  EXPECT_EQ(load_error("parallel:\n  tensor: 8\n  pipeline: 2\n",
                       {"hardware.node_link_bandwidth_gbps=0"}),
            "--set: hardware.node_link_bandwidth_gbps: expected a positive bandwidth between "
            "nodes: a replica of 16 GPUs spans 8-GPU nodes, found 0");
  EXPECT_EQ(load_error("parallel:\n  tensor: 2\n  expert: 2\n", {}),
            "s.yaml:3:11: parallel.expert: expected 1 for llama-3-8b, which has no experts, found "
            "2");
}

TEST(ParallelReplicas, PipelineAndExpertDegreesLoadAndRoundTrip) {
  const std::vector<std::string> set = {"model.preset=mixtral-8x7b", "parallel.tensor=4",
                                        "parallel.pipeline=2", "parallel.expert=4"};
  const Scenario s = load_default_scenario(set);
  EXPECT_EQ(s.parallel, (ParallelSpec{4, 2, 4}));
  EXPECT_EQ(s.parallel.gpus(), 8);
  EXPECT_EQ(s.hardware.spec.interconnect.node_link_bandwidth, 50e9);
  // The H100 preset's network: NDR at 50 GB/s, a send taking 20 us and 0.72 of the bandwidth.
  EXPECT_EQ(s.hardware.spec.interconnect.node_link_latency, 20000);
  EXPECT_EQ(s.hardware.spec.interconnect.node_link_efficiency, 0.72);
  expect_round_trip(s);
}

}  // namespace
}  // namespace exitsim::scenario
