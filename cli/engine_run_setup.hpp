#pragma once

// A scenario as an engine run: its workload as engine requests on the model's text, and the
// engine's options (from the one scenario adapter, exitsim/setup, plus what the command line adds).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine_model.hpp"
#include "exitsim/engine/engine.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::cli {

struct RunArgs {
  ModelOptions model;
  ScenarioOptions scenario;
  std::string out;
  std::string profile;
  bool no_output = false;
  bool honour_arrivals = false;
  bool rollback = false;
  double temperature = 0;
  int warmup_requests = -1;  // decoded untimed before the measured run (-1: engine.warmup_requests)
};

std::vector<engine::EngineRequest> engine_requests(const scenario::Scenario& s,
                                                   const std::vector<std::int32_t>& corpus);
engine::EngineOptions engine_options(const scenario::Scenario& s, const RunArgs& args,
                                     std::int64_t longest);
// The most positions any of the requests needs (prompt and output), at least 1: what the CPU
// K/V pool is sized by when the scenario gives no kv_blocks.
std::int64_t longest_request(std::span<const engine::EngineRequest> requests);

// Decodes the first `count` requests (all arriving at once) with `options` and throws the result
// away: the weights paged in, caches and the OpenMP team warm before anything is timed.
void warm_up_engine(const engine::Backend& backend, std::span<const engine::EngineRequest> requests,
                    engine::EngineOptions options, int count);

}  // namespace exitsim::cli
