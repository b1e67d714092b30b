#pragma once

// The engine's options from the one scenario adapter (exitsim/setup/executor_setup.hpp), so that
// every caller that runs the engine on a scenario (`exitsim engine run`, `validate`, the
// conformance suite) schedules, exits, synchronises and swaps as the simulator does.

#include "exitsim/engine/engine.hpp"
#include "exitsim/setup/executor_setup.hpp"

namespace exitsim::engine {

// The policy-level options; the caller adds what is its own (temperature, arrivals, rollback,
// observers, a virtual clock) and, when `setup.kv_blocks` is 0, sizes the K/V pool.
EngineOptions options_from_setup(const setup::ExecutorSetup& setup);

}  // namespace exitsim::engine
