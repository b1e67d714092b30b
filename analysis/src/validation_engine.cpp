#include <algorithm>
#include <cmath>
#include <map>

#include "exitsim/analysis/engine_measurement.hpp"
#include "exitsim/sim/cost/step_batch.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::analysis {

EngineMeasurement measure_engine_run(std::span<const EngineStep> steps,
                                     std::span<const traces::TokenTraceRow> tokens,
                                     std::span<const EngineRequestSent> requests, TimeNs wall,
                                     double time_scale) {
  const auto scaled = [&](TimeNs t) {
    return static_cast<TimeNs>(std::llround(static_cast<double>(t) * time_scale));
  };
  EngineMeasurement m;
  sim::MetricsCollector metrics(sim::MetricsOptions{});
  // When each request was first scheduled: the start of the first step that worked on it.
  std::map<std::uint64_t, TimeNs> first_scheduled;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const EngineStep& step = steps[k];
    const TimeNs end = k + 1 < steps.size() ? steps[k + 1].start - steps[k + 1].idle_before : wall;
    // Scaled as points in time, so that a scaled step still ends where the next one starts.
    const TimeNs duration = scaled(end) - scaled(step.start);
    m.compared.iterations.push_back(duration);
    m.steps.push_back(step.rows);
    metrics.record_iteration({0, scaled(step.start), duration,
                              static_cast<std::int64_t>(step.requests.size()), 0, 0, 0, 0});
    for (const RequestId id : step.requests)
      first_scheduled.try_emplace(id.value, step.start);
  }
  struct Times {
    TimeNs first = -1, last = -1;
    std::int64_t tokens = 0;
  };
  std::map<std::uint64_t, Times> times;
  for (const traces::TokenTraceRow& t : tokens) {
    Times& r = times[t.request_id];
    r.first = r.first < 0 ? t.time_ns : std::min(r.first, t.time_ns);
    r.last = std::max(r.last, t.time_ns);
    ++r.tokens;
  }
  for (const EngineRequestSent& r : requests) {
    const Times& t = times[r.id.value];
    const auto since_arrival = [&](TimeNs at) { return r.arrival + scaled(at - r.arrival); };
    sim::RequestRecord record;
    record.id = r.id;
    record.arrival = r.arrival;
    const auto scheduled = first_scheduled.find(r.id.value);
    record.first_scheduled =
        since_arrival(scheduled != first_scheduled.end() ? scheduled->second : r.arrival);
    record.first_token = since_arrival(t.first);
    record.completion = since_arrival(t.last);
    record.input_tokens = r.input_tokens;
    record.output_tokens = t.tokens;
    metrics.record_request(record);
  }
  m.compared.summary = metrics.summarize();
  return m;
}

std::vector<TimeNs> price_engine_steps(const EngineMeasurement& m, const sim::CostModel& model,
                                       const DepthStructure& depth, policy::SyncStrategy strategy) {
  sim::StepPricer pricer(model, depth, strategy);
  std::vector<TimeNs> priced;
  priced.reserve(m.steps.size());
  for (const std::vector<policy::StepRow>& rows : m.steps)
    priced.push_back(pricer.duration(rows));
  return priced;
}

}  // namespace exitsim::analysis
