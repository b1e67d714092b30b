#include "exitsim/analysis/plan.hpp"

#include <gtest/gtest.h>

#include <string>

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
  EXPECT_NE(plan.recommendation.find(">= 1.64e+04 per replica within the SLOs (a lower bound"),
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
