#pragma once

// Replay's exits: a token trace (`exitsim engine run`'s token_trace.csv) as the lookup the shared
// replay policy reads.

#include <string>

#include "exitsim/core/model_shape.hpp"
#include "exitsim/policy/exit_policy.hpp"

namespace exitsim::setup {

// Every row is checked against the model when the trace is read, so that a trace of another
// model is refused naming its line whatever the workload replays (a token the run never reaches
// went unchecked), and a trace without rows, which would replay nothing, is refused. Throws
// InputError naming the file (and line).
policy::ExitLookup token_trace_lookup(const std::string& path, const DepthStructure& depth);

}  // namespace exitsim::setup
