// The planner's steady-state judgement: warm-up and drain excluded, and a growing queue is never
// sustainable.
#include "exitsim/analysis/steady_state.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exitsim/analysis/plan.hpp"
#include "support/test_files.hpp"

namespace exitsim::analysis {
namespace {

constexpr TimeNs k_ms = 1'000'000;

// `count` requests arriving every `gap`, served one at a time for `service` each, in order (a
// single-server FIFO queue); one output token per `service`/4.
std::vector<sim::RequestRecord> fifo(int count, TimeNs gap, TimeNs service) {
  std::vector<sim::RequestRecord> out;
  TimeNs free_at = 0;
  for (int i = 0; i < count; ++i) {
    sim::RequestRecord r;
    r.id = RequestId(static_cast<std::uint64_t>(i));
    r.arrival = i * gap;
    r.first_scheduled = std::max(r.arrival, free_at);
    r.first_token = r.first_scheduled + service / 4;
    r.completion = r.first_scheduled + service;
    r.output_tokens = 4;
    free_at = r.completion;
    out.push_back(r);
  }
  return out;
}

TEST(SteadyState, AStableQueueIsSustainable) {
  const auto records = fifo(400, 10 * k_ms, 6 * k_ms);
  const SteadyState s = steady_state(records, {100.0, 10.0, std::nullopt});
  EXPECT_EQ(s.requests, 320U);  // 10% trimmed at each end
  EXPECT_DOUBLE_EQ(s.attainment, 1.0);
  EXPECT_FALSE(s.queue_growing);
  EXPECT_DOUBLE_EQ(s.queue_delay_last_ms, 0.0);  // nobody waits: 6 ms of work every 10 ms
  EXPECT_NEAR(s.requests_per_s, 100.0, 1e-9);
  EXPECT_NEAR(s.output_tokens_per_s, 400.0, 1e-9);
}

TEST(SteadyState, AGrowingQueueIsNotSustainableWhateverTheSlos) {
  // Arrivals every 10 ms, 12 ms of service: the queue grows by one request every 60 ms. With
  // SLOs of a day every request "meets" them, yet the load is not sustainable.
  const auto records = fifo(400, 10 * k_ms, 12 * k_ms);
  const SteadyState s = steady_state(records, {86'400'000.0, 86'400'000.0, std::nullopt});
  EXPECT_DOUBLE_EQ(s.attainment, 1.0);
  EXPECT_TRUE(s.queue_growing);
  // Each arrival waits 2 ms longer than the one before: the fitted rise spans the nine batches
  // between the first batch's centre and the last's.
  EXPECT_NEAR(s.queue_rise_ms, 2.0 * 0.9 * static_cast<double>(s.requests), 2.0 * 10);
  EXPECT_GT(s.queue_trend_t, 100.0);
}

TEST(SteadyState, WarmUpAndDrainAreNotTheService) {
  // The first 10% of requests wait behind a cold start; the steady window does not see them.
  auto records = fifo(400, 10 * k_ms, 6 * k_ms);
  for (int i = 0; i < 40; ++i) {
    records[static_cast<std::size_t>(i)].first_token += 5000 * k_ms;
    records[static_cast<std::size_t>(i)].completion += 5000 * k_ms;
  }
  const SteadyState s = steady_state(records, {100.0, 10.0, std::nullopt});
  EXPECT_DOUBLE_EQ(s.attainment, 1.0);
  EXPECT_LT(s.ttft_p99_ms, 10.0);
}

// With SLOs no latency breaks (a day), whole-run attainment would call every load sustainable
// and the plan would report only a lower bound; the steady-state test finds the load at which
// the queue stops growing instead.
TEST(SteadyState, ThePlannerRefusesLoadsWhoseQueueGrows) {
  test_support::TempDir dir;
  PlanOptions o;
  o.scenario_file = dir.write("plan.yaml",
                              "workload:\n  requests: 1600\n"
                              "  input_tokens: {max: 2048}\n  output_tokens: {max: 512}\n"
                              "slo:\n  ttft_ms: 86400000\n  tpot_ms: 86400000\n");
  o.bisection_steps = 5;
  const Plan plan = plan_capacity(o);
  ASSERT_EQ(plan.candidates.size(), 1U);
  const CandidatePlan& c = plan.candidates[0];
  EXPECT_FALSE(c.max_load_is_lower_bound);
  EXPECT_GT(c.max_load_per_replica, 4.0);
  EXPECT_LT(c.max_load_per_replica, 100.0);  // an H100 serving llama-3-8b at these lengths
  EXPECT_FALSE(c.steady_at_max_rate.queue_growing);
  EXPECT_DOUBLE_EQ(c.steady_at_max_rate.attainment, 1.0);
}

// The default scenario's capacity (an H100 serving llama-3-8b; saturation near 22 req/s) from
// runs of 1,600, 4,000 and 10,000 requests. Before the batch-means queue test and the
// saturation bound the same plan gave 11.1, 23 and 12.5 req/s at 400, 1,600 and 6,400 requests.
TEST(SteadyState, CapacityConvergesAsTheRunGrows) {
  std::vector<double> capacity;
  for (const int requests : {1600, 4000, 10000}) {
    PlanOptions o;
    o.overrides = {"workload.requests=" + std::to_string(requests)};
    const Plan plan = plan_capacity(o);
    ASSERT_EQ(plan.candidates.size(), 1U);
    const CandidatePlan& c = plan.candidates[0];
    EXPECT_FALSE(c.max_load_is_lower_bound);
    EXPECT_GT(c.saturation_load, 0.0);
    EXPECT_LT(c.max_load_per_replica, c.saturation_load);
    capacity.push_back(c.max_load_per_replica);
  }
  const auto [lo, hi] = std::minmax_element(capacity.begin(), capacity.end());
  EXPECT_GT(*lo, 15.0);
  EXPECT_LE(*hi / *lo, 1.10) << capacity[0] << " " << capacity[1] << " " << capacity[2];
}

// A load the replica cannot serve however the finite run looks: above the saturation rate. At
// 400 requests the steady window near capacity is too short for the queue test, and the SLOs
// still hold at 24 req/s (above the ~22.4 saturation), so without the bound the bisection would
// settle above it.
TEST(SteadyState, NoLoadAtOrAboveSaturationIsSustainable) {
  PlanOptions o;
  o.overrides = {"workload.requests=400"};  // too short for the queue test to see anything
  const Plan plan = plan_capacity(o);
  const CandidatePlan& c = plan.candidates[0];
  EXPECT_LT(c.max_load_per_replica, c.saturation_load);
  EXPECT_GE(c.saturation_requests, 4000U);
}

}  // namespace
}  // namespace exitsim::analysis
