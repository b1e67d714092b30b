#include "exitsim/analysis/plan.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "exitsim/analysis/steady_state.hpp"
#include "exitsim/scenario/load.hpp"
#include "exitsim/sim/simulator.hpp"
#include "exitsim/sim/workload/workload.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

using test_support::error_of;
using test_support::TempDir;

PlanOptions options_for(const TempDir& dir, const std::string& yaml) {
  PlanOptions o;
  o.scenario_file = dir.write("plan.yaml", yaml);
  o.jobs = 2;
  o.bisection_steps = 5;
  return o;
}

constexpr const char* k_scenario =
    "workload:\n  requests: 200\n"
    "slo:\n  ttft_ms: 2000\n  tpot_ms: 50\n"
    "sweep:\n  - key: scheduler.max_running\n    values: [8, 128]\n";

// SLOs no load breaks (a day), fifteen short requests.
constexpr const char* k_slos_never_bind =
    "workload:\n  requests: 15\n"
    "  input_tokens: {dist: fixed, value: 64}\n"
    "  output_tokens: {dist: fixed, value: 4}\n"
    "slo:\n  ttft_ms: 86400000\n  tpot_ms: 86400000\n";

// With SLOs no load breaks (a day of TPOT), too few requests (15) for a queue to be judged
// growing and none for a saturation run to bound the load, the bracket never fails: the figure
// reported is the highest load tried, a lower bound, and the plan must say so.
TEST(PlanCapacity, ACapacityTheSlosNeverBoundIsMarkedALowerBound) {
  TempDir dir;
  PlanOptions o = options_for(dir, k_slos_never_bind);
  o.saturation_min_requests = 0;
  const Plan plan = plan_capacity(o);
  ASSERT_EQ(plan.candidates.size(), 1U);
  EXPECT_EQ(plan.candidates[0].saturation_load, 0.0);
  EXPECT_TRUE(plan.candidates[0].max_load_is_lower_bound);
  EXPECT_DOUBLE_EQ(plan.candidates[0].max_load_per_replica, 4.0 * 4096);  // start x 2^12
  EXPECT_NE(plan.recommendation.find(
                ">= 1.64e+04 per replica of h100-sxm within the SLOs (a lower bound"),
            std::string::npos)
      << plan.recommendation;
  EXPECT_NE(plan_csv(plan).find(",yes,yes,0,"), std::string::npos);  // recommended, bound
  EXPECT_NE(plan_json(plan).find("\"max_load_is_lower_bound\": true"), std::string::npos);
}

// The same scenario with a saturation run of 4,000 requests: the replica's saturation rate
// bounds the load, so the capacity is a figure, not a bound.
TEST(PlanCapacity, TheSaturationRateBoundsALoadTheSlosNeverBind) {
  TempDir dir;
  PlanOptions o = options_for(dir, k_slos_never_bind);
  const Plan plan = plan_capacity(o);
  const CandidatePlan& c = plan.candidates[0];
  EXPECT_FALSE(c.max_load_is_lower_bound);
  EXPECT_EQ(c.saturation_requests, 4000U);
  EXPECT_GT(c.saturation_load, 100.0);
  EXPECT_LT(c.max_load_per_replica, c.saturation_load);
  EXPECT_GT(c.max_load_per_replica, 0.9 * c.saturation_load);  // the bisection's resolution
}

TEST(PlanCapacity, FindsEachCandidatesCapacityAndTheReplicasForATarget) {
  TempDir dir;
  PlanOptions o = options_for(dir, k_scenario);
  o.target_rate = 30;
  o.gpu_hour_price = 2;
  const Plan plan = plan_capacity(o);
  ASSERT_EQ(plan.candidates.size(), 2U);
  const CandidatePlan& small = plan.candidates[0];
  const CandidatePlan& large = plan.candidates[1];
  EXPECT_EQ(small.load_key, "workload.arrivals.rate");
  // Batching more sequences serves more requests within the same SLOs.
  EXPECT_GT(large.max_load_per_replica, small.max_load_per_replica);
  EXPECT_GT(small.max_load_per_replica, 0);
  EXPECT_LE(large.at_max_rate.tpot_p99_ms, 50 * 1.5);  // at capacity, near the SLO at most
  ASSERT_GT(large.replicas, 0);
  EXPECT_GE(small.replicas, large.replicas);
  EXPECT_DOUBLE_EQ(large.cost_per_hour, 2.0 * large.replicas);
  EXPECT_GT(large.cost_per_million_tokens, 0);
  ASSERT_TRUE(plan.recommended.has_value());
  EXPECT_EQ(*plan.recommended, 1U);
  EXPECT_NE(plan.recommendation.find("scheduler.max_running=128"), std::string::npos)
      << plan.recommendation;

  // Deterministic: the same plan again.
  const Plan again = plan_capacity(o);
  EXPECT_EQ(again.candidates[0].max_load_per_replica, small.max_load_per_replica);
  EXPECT_EQ(again.candidates[1].replicas, large.replicas);
}

// A pipelined replica spans TP x PP GPUs: Llama-3.1-70B at TP 2 on H100s, with and without a
// second stage. The second stage halves each GPU's weights, so the replica holds about 2.9x the
// K/V tokens and runs larger batches: it sustains 3.31 req/s against 2.19, more per replica but
// less per GPU (decode re-reads each stage's weights per micro-batch). At 3 req/s both take 4
// GPUs (2 replicas of TP 2, or 1 of TP 2 x PP 2); the tie goes to the capacity per GPU.
TEST(PlanCapacity, APipelinedReplicaCountsTheGpusOfEveryStage) {
  TempDir dir;
  PlanOptions o = options_for(dir,
                              "model:\n  preset: llama-3.1-70b\n"
                              "parallel:\n  tensor: 2\n"
                              "workload:\n  requests: 100\n"
                              "slo:\n  ttft_ms: 5000\n  tpot_ms: 100\n"
                              "sweep:\n  - key: parallel.pipeline\n    values: [1, 2]\n");
  o.target_rate = 3;
  const Plan plan = plan_capacity(o);
  ASSERT_EQ(plan.candidates.size(), 2U);
  const CandidatePlan& one = plan.candidates[0];
  const CandidatePlan& two = plan.candidates[1];
  EXPECT_EQ(one.gpus_per_replica, 2);
  EXPECT_EQ(two.gpus_per_replica, 4);
  EXPECT_EQ(two.tensor, 2);
  EXPECT_EQ(two.pipeline, 2);
  ASSERT_GT(one.replicas, 0);
  ASSERT_GT(two.replicas, 0);
  EXPECT_EQ(one.gpus, 2 * one.replicas);
  EXPECT_EQ(two.gpus, 4 * two.replicas);
  EXPECT_GT(two.max_load_per_replica, one.max_load_per_replica);
  EXPECT_LT(two.max_load_per_replica / 4, one.max_load_per_replica / 2);
  EXPECT_EQ(two.gpus, one.gpus) << plan_csv(plan);
  EXPECT_EQ(plan.recommended, std::optional<std::size_t>(0));
  EXPECT_NE(plan_csv(plan).find(fmt::format(",h100-sxm,4,{},0,2,2,0,0\n", two.gpus)),
            std::string::npos)
      << plan_csv(plan);
}

// A disaggregated candidate (one prefill and one decode group) gets its two pools sized apart,
// each to what its SLO needs: a tight TPOT with ordinary prompts takes more decode replicas; long
// prompts with short answers under a TTFT bound take more prefill replicas. Each pool is the
// fewest: one replica fewer in either misses the SLOs at 20 req/s (checked here by running it).
TEST(PlanCapacity, SizesPrefillAndDecodePoolsApart) {
  const std::string groups =
      "cluster:\n  groups:\n"
      "    - {count: 1, set: [\"scheduler.role=prefill\"]}\n"
      "    - {count: 1, set: [\"scheduler.role=decode\"]}\n";
  struct Case {
    std::string yaml;
    bool more_decode;
  };
  for (const Case& k :
       {Case{"workload: {requests: 300}\nslo: {ttft_ms: 300, tpot_ms: 9}\n" + groups, true},
        Case{"workload: {requests: 300, input_tokens: {dist: fixed, value: 6000}, "
             "output_tokens: {dist: fixed, value: 16}}\nslo: {ttft_ms: 400, tpot_ms: 50}\n" +
                 groups,
             false}}) {
    SCOPED_TRACE(k.yaml);
    TempDir dir;
    PlanOptions o = options_for(dir, k.yaml);
    o.target_rate = 20;
    const Plan plan = plan_capacity(o);
    ASSERT_EQ(plan.candidates.size(), 1U);
    const CandidatePlan& c = plan.candidates[0];
    ASSERT_TRUE(c.disaggregated);
    ASSERT_GT(c.replicas, 0);
    EXPECT_EQ(c.replicas, c.prefill_replicas + c.decode_replicas);
    EXPECT_EQ(c.gpus, c.replicas);
    if (k.more_decode) {
      EXPECT_LT(c.prefill_replicas, c.decode_replicas);
    } else {
      EXPECT_GT(c.prefill_replicas, c.decode_replicas);
    }
    EXPECT_NE(plan.recommendation.find(fmt::format("{} prefill + {} decode replicas",
                                                   c.prefill_replicas, c.decode_replicas)),
              std::string::npos)
        << plan.recommendation;
    EXPECT_NE(plan_csv(plan).find(fmt::format(",{},{}\n", c.prefill_replicas, c.decode_replicas)),
              std::string::npos);
    // One fewer in either pool misses, by the plan's own criterion over the steady window.
    const auto meets = [&](int prefill, int decode) {
      const scenario::Scenario s = scenario::load_scenario_file(
          o.scenario_file,
          std::vector<std::string>{
              "workload.arrivals.rate=20",
              fmt::format("cluster.groups=[{{count: {}, set: [\"scheduler.role=prefill\"]}}, "
                          "{{count: {}, set: [\"scheduler.role=decode\"]}}]",
                          prefill, decode)});
      const auto workload = sim::make_workload(s.workload, s.seed);
      sim::SimulationConfig config = sim::simulation_config_from(s, "");
      std::vector<sim::RequestRecord> requests;
      config.request_observer = [&](const sim::RequestRecord& r) { requests.push_back(r); };
      sim::simulate(config, *workload);
      const SteadyState steady = steady_state(requests, config.slo);
      return steady.attainment >= o.min_attainment && !steady.queue_growing;
    };
    EXPECT_TRUE(meets(c.prefill_replicas, c.decode_replicas));
    if (c.prefill_replicas > 1) {
      EXPECT_FALSE(meets(c.prefill_replicas - 1, c.decode_replicas));
    }
    if (c.decode_replicas > 1) {
      EXPECT_FALSE(meets(c.prefill_replicas, c.decode_replicas - 1));
    }
  }
}

// Only one prefill and one decode group can be sized; other mixes of roles are refused.
TEST(PlanCapacity, RefusesRoleMixesItCannotSize) {
  TempDir dir;
  PlanOptions o = options_for(dir,
                              "workload: {requests: 50}\nslo: {ttft_ms: 300}\ncluster:\n  groups:\n"
                              "    - {count: 1, set: [\"scheduler.role=prefill\"]}\n"
                              "    - {count: 1}\n");
  o.target_rate = 2;
  EXPECT_NE(error_of([&] { plan_capacity(o); })
                .find("scheduler.role: expected one prefill group and one decode group for "
                      "exitsim plan to size the two pools, found 1 prefill, 0 decode and 1 mixed "
                      "groups"),
            std::string::npos);
}

// Candidates on 1, 2 and 4 GPUs per replica of two accelerators at their own prices: the plan
// counts GPUs (replicas x parallel.tensor) and their cost, and recommends the fewest GPUs, then
// the cheapest. At a 6 ms TPOT SLO one H100 cannot serve llama-3-8b at all (7.5 ms per token).
TEST(PlanCapacity, CountsGpusAndRecommendsTheFewestThenTheCheapest) {
  TempDir dir;
  PlanOptions o = options_for(dir,
                              "workload:\n  requests: 200\n"
                              "slo:\n  ttft_ms: 2000\n  tpot_ms: 6\n"
                              "sweep:\n  - key: parallel.tensor\n    values: [1, 2, 4]\n"
                              "  - key: hardware.preset\n    values: [h100-sxm, h200]\n");
  o.target_rate = 12;
  o.gpu_hour_prices = {{"h100-sxm", 2.5}, {"h200", 3.5}};
  const Plan plan = plan_capacity(o);
  ASSERT_EQ(plan.candidates.size(), 6U);
  int fewest = 0;
  for (const CandidatePlan& c : plan.candidates) {
    SCOPED_TRACE(c.point.key);
    EXPECT_EQ(c.gpus, c.replicas * c.gpus_per_replica);
    EXPECT_DOUBLE_EQ(c.gpu_hour_price, c.hardware == "h200" ? 3.5 : 2.5);
    EXPECT_DOUBLE_EQ(c.cost_per_hour, c.gpus * c.gpu_hour_price);
    if (c.gpus > 0 && (fewest == 0 || c.gpus < fewest))
      fewest = c.gpus;
  }
  EXPECT_EQ(plan.candidates[0].gpus_per_replica, 1);
  EXPECT_EQ(plan.candidates[0].replicas, 0);  // TP 1 on an H100 misses the TPOT SLO
  EXPECT_EQ(plan.candidates[4].gpus_per_replica, 4);
  ASSERT_TRUE(plan.recommended.has_value());
  const CandidatePlan& chosen = plan.candidates[*plan.recommended];
  EXPECT_EQ(chosen.gpus, fewest);
  for (const CandidatePlan& c : plan.candidates) {
    if (c.gpus == fewest) {
      EXPECT_LE(chosen.cost_per_hour, c.cost_per_hour) << c.point.key;
    }
  }
  // The candidates differ in GPUs, so the choice is not a tie.
  EXPECT_NE(std::count_if(plan.candidates.begin(), plan.candidates.end(),
                          [&](const CandidatePlan& c) { return c.gpus == fewest; }),
            6);
  EXPECT_NE(plan.recommendation.find(fmt::format("{} GPUs (", fewest)), std::string::npos)
      << plan.recommendation;
  EXPECT_NE(plan_csv(plan).find(",hardware,gpus_per_replica,gpus,gpu_hour_price,tensor,pipeline,"
                                "prefill_replicas,decode_replicas\n"),
            std::string::npos);

  // A price by name must cover every candidate's accelerator, or its cost would read 0.
  o.gpu_hour_prices = {{"h100-sxm", 2.5}};
  EXPECT_NE(error_of([&] {
              plan_capacity(o);
            }).find("--gpu-hour-prices: expected a price for h200 (candidate "),
            std::string::npos);
}

TEST(PlanCapacity, SaysSoWhenNothingMeetsTheSlos) {
  TempDir dir;
  PlanOptions o = options_for(dir, "workload:\n  requests: 50\nslo:\n  tpot_ms: 0.001\n");
  o.target_rate = 10;
  o.max_replicas = 2;
  const Plan plan = plan_capacity(o);
  EXPECT_FALSE(plan.recommended.has_value());
  EXPECT_EQ(plan.candidates[0].max_load_per_replica, 0);
  EXPECT_NE(plan.recommendation.find("no candidate meets the SLOs"), std::string::npos);
}

TEST(PlanCapacity, RefusesWhatCannotBePlanned) {
  TempDir dir;
  const PlanOptions no_slo = options_for(
      dir, "workload:\n  requests: 50\nslo:\n  ttft_ms: null\n  tpot_ms: null\n  e2e_ms: null\n");
  EXPECT_NE(error_of([&] { plan_capacity(no_slo); }).find("slo: expected at least one"),
            std::string::npos);
  PlanOptions scale = options_for(dir, k_scenario);
  scale.trace_scale = 2;
  EXPECT_NE(error_of([&] { plan_capacity(scale); }).find("--trace-scale"), std::string::npos);
  PlanOptions negative = options_for(dir, k_scenario);
  negative.target_rate = -1;
  EXPECT_NE(error_of([&] { plan_capacity(negative); }).find("--target-rate"), std::string::npos);
}

}  // namespace
}  // namespace exitsim::analysis
