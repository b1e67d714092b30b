#pragma once

// An engine run as `exitsim validate` measures it: its steps' durations, what each step ran and
// its request metrics, from what the engine reported. Analysis never links the engine: the
// caller hands over the engine's records in the shared policy and trace types (the step rows the
// scheduler saw, the token trace rows the run writes).

#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/analysis/validation.hpp"
#include "exitsim/core/ids.hpp"
#include "exitsim/core/time.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/policy/sync_strategy.hpp"
#include "exitsim/sim/cost/cost_model.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::analysis {

// One engine step: when it started on the engine clock, how long the engine slept waiting for
// arrivals before it, the requests it worked on (prompt chunks, then decodes) and their rows.
struct EngineStep {
  TimeNs start = 0;
  TimeNs idle_before = 0;
  std::vector<RequestId> requests;
  std::vector<policy::StepRow> rows;
};

// One request as the engine was given it.
struct EngineRequestSent {
  RequestId id;
  TimeNs arrival = 0;
  std::int64_t input_tokens = 0;
};

struct EngineMeasurement {
  EngineRunMeasurement compared;
  std::vector<std::vector<policy::StepRow>> steps;  // per step, what each sequence ran
};

// `tokens`: the run's kept tokens (its token trace); `wall`: when the run ended. `time_scale`
// multiplies every measured time span (validate --normalize-speed; 1 otherwise).
EngineMeasurement measure_engine_run(std::span<const EngineStep> steps,
                                     std::span<const traces::TokenTraceRow> tokens,
                                     std::span<const EngineRequestSent> requests, TimeNs wall,
                                     double time_scale);

// The engine's steps priced by `model`, step by step: the cost model's error alone. Each step is
// priced from the rows the engine recorded (its executed synchronization plan), through the same
// translation the simulator prices its own iterations with.
std::vector<TimeNs> price_engine_steps(const EngineMeasurement& m, const sim::CostModel& model,
                                       const DepthStructure& depth, policy::SyncStrategy strategy);

}  // namespace exitsim::analysis
