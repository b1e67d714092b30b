#pragma once

#include <cstdint>
#include <memory>

#include "exitsim/scenario/scenario.hpp"
#include "exitsim/traces/request_source.hpp"

namespace exitsim::sim {

// Names of the random streams a workload draws from (see RandomStream): each part of the
// workload has its own, so changing one distribution never changes the others' numbers.
inline constexpr const char* k_arrivals_stream = "workload.arrivals";
inline constexpr const char* k_input_tokens_stream = "workload.input_tokens";
inline constexpr const char* k_output_tokens_stream = "workload.output_tokens";
inline constexpr const char* k_prefix_stream = "workload.prefix";

// The request stream a scenario's workload describes, seeded with the scenario seed:
// - source "synthetic": `requests` generated requests (SyntheticRequestSource);
// - source "trace": the trace replayed with rate scaling, a request cap and, for traces without
//   timestamps, arrivals from `arrivals` (TraceReplaySource);
// then, with a `prefix` model, the prompts' shared prefixes named (PrefixModelSource).
// Throws InputError (field = scenario key path) on impossible settings, and whatever
// open_request_trace throws for an unreadable trace. Settings the chosen source does not use are
// not validated (a trace with timestamps ignores `arrivals` and the length distributions).
std::unique_ptr<traces::RequestSource> make_workload(const scenario::WorkloadConfig& config,
                                                     std::uint64_t seed);

}  // namespace exitsim::sim
