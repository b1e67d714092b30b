#pragma once

#include <memory>

#include "exitsim/core/hardware.hpp"
#include "exitsim/core/model_shape.hpp"
#include "exitsim/core/parallel.hpp"
#include "exitsim/scenario/scenario.hpp"
#include "exitsim/sim/cost/cost_model.hpp"

namespace exitsim::sim {

// The cost model a scenario asks for. `roofline` is built from the model shape and the hardware
// spec; `table` reads the per-op cost table at `config.profile` (relative paths resolve against
// the working directory); `calibrated` reads the cost profile at `config.profile`, which must
// have been measured on `hardware` (by name) and the model's shape. Throws InputError for a
// malformed or unreadable table or profile, a profile of other hardware or another model, for
// efficiencies outside (0, 1], and for hardware without a peak for the model's dtype or without
// memory bandwidth. `parallel`: the roofline prices one GPU's shard and the collectives; a
// measured model (table, calibrated) prices its measurements as one GPU's shard at
// parallel.tensor (a profile measured at another degree is refused) and takes the collectives,
// hand-offs and logits gather it did not measure from a roofline of `hardware` (docs/cost_model.md,
// "Measured cost models under TP and PP"). `exit_probes`: the roofline prices a confidence probe
// at every exit point (a measured model's probes are in what it measured).
std::unique_ptr<CostModel> make_cost_model(const scenario::CostModelConfig& config,
                                           const ModelShape& model, const HardwareSpec& hardware,
                                           ParallelSpec parallel = {}, bool exit_probes = false);

// make_cost_model's `exit_probes` for a replica of this exit policy: one that decides by
// confidence runs the LM head at each exit point, and the roofline prices those probes. The one
// rule the simulator and `exitsim cost` share.
bool prices_exit_probes(const scenario::ExitPolicyConfig& policy);

}  // namespace exitsim::sim
