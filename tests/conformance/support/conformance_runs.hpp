#pragma once

// The conformance suite's runs (conformance_test.cpp): one workload on the engine tests' small
// model, the scenario of each case, the simulator's and the engine's step traces of it, and the
// comparison that names the first field in which two steps differ.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/policy/step_trace.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/metrics/metrics.hpp"
#include "exitsim/traces/token_trace.hpp"

namespace exitsim::conformance {

// Requests arriving over a few steps' time with mixed lengths: they overlap, queue, and under
// the tight K/V budget some are preempted and recomputed.
struct Request {
  std::uint64_t id;
  TimeNs arrival;
  std::int64_t prompt;
  std::int64_t output;
};
std::vector<Request> workload();
// The workload's requests for the engine: prompts of random tokens, the same in every run.
std::vector<engine::EngineRequest> engine_requests();

struct Case {
  std::string scheduler;
  std::string strategy;
  // distribution, position_schedule, replay_confidence, replay_router, adaptive
  std::string exits;
  // depthwise: immediate, accumulate, head_queue (returns behind the waiting requests),
  // head_queue_ahead (returns ahead of them)
  std::string exited_tokens = "immediate";
  std::string preemption = "recompute";  // recompute, swap
};
std::string name_of(const Case& c);
// For gtest's messages (the test name says it too).
void PrintTo(const Case& c, std::ostream* out);

// The case's scenario: the default scenario with the case's settings, on the small model.
scenario::Scenario scenario_for(const Case& c);

struct Traces {
  std::vector<policy::StepTrace> steps;
  TimeNs makespan = 0;
  engine::EngineSwaps swaps;  // the engine's
  // adaptive_threshold: every refit attempt, in the simulator's row form (the engine's converted)
  std::vector<sim::ThresholdTrajectoryRow> trajectory;
  std::vector<traces::TokenTraceRow> tokens;  // the engine's token trace rows
};
Traces simulate(const scenario::Scenario& s);
// The engine on a virtual clock priced by the simulator's cost model.
Traces run_engine(const scenario::Scenario& s);
// The engine run's token trace, for the simulator to replay its confidences and agreements.
std::string write_confidence_trace(const Traces& executed, const std::string& name);

// The first plan field that differs between two steps' rows, named with both values ("" if
// every plan field agrees), then anything else operator== compares.
std::string first_difference(const policy::StepTrace& a, const policy::StepTrace& b);

}  // namespace exitsim::conformance
