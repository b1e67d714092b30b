#include "engine_run_setup.hpp"

#include <algorithm>

#include "exitsim/core/error.hpp"
#include "exitsim/engine/options_from_setup.hpp"
#include "exitsim/engine/tokenizer.hpp"
#include "exitsim/setup/executor_setup.hpp"
#include "exitsim/sim/workload/workload.hpp"

namespace exitsim::cli {

std::int64_t longest_request(std::span<const engine::EngineRequest> requests) {
  std::int64_t longest = 1;
  for (const engine::EngineRequest& r : requests)
    longest = std::max(longest, static_cast<std::int64_t>(r.prompt.size()) + r.output_tokens);
  return longest;
}

std::vector<engine::EngineRequest> engine_requests(const scenario::Scenario& s,
                                                   const std::vector<std::int32_t>& corpus) {
  const auto workload = sim::make_workload(s.workload, s.seed);
  const engine::PromptSource prompts(corpus, s.seed);
  std::vector<engine::EngineRequest> requests;
  while (auto descriptor = workload->next()) {
    engine::EngineRequest r;
    r.id = descriptor->id;
    r.arrival = descriptor->arrival.value_or(0);
    r.prompt = prompts.prompt(descriptor->id, descriptor->input_tokens);
    r.output_tokens = descriptor->output_tokens;
    requests.push_back(std::move(r));
  }
  return requests;
}

engine::EngineOptions engine_options(const scenario::Scenario& s, const RunArgs& args,
                                     std::int64_t longest) {
  // What only the simulator models so far: refused rather than run as something else.
  if (s.scheduler.prefix_caching) {
    throw InputError({"", 0, 0, "scheduler.prefix_caching"},
                     expected_found("false for the engine (prefix caching is modelled by the "
                                    "simulator only so far)",
                                    "true"));
  }
  // Scheduling, exits (replay's token trace included), synchronisation and the host swap tier
  // exactly as the simulator takes them from the scenario.
  engine::EngineOptions o = engine::options_from_setup(setup::executor_setup(s));
  if (o.kv_blocks == 0) {
    // No device memory to size from on the CPU: room for max_running of the longest request.
    const std::int64_t per_sequence = (longest + o.block_size - 1) / o.block_size;
    o.kv_blocks = per_sequence * std::min<std::int64_t>(s.scheduler.max_running, 64);
  }
  o.temperature = args.temperature;
  o.honour_arrivals = args.honour_arrivals;
  if (s.sync.rollback_probability > 0) {
    throw InputError({"", 0, 0, "sync.rollback_probability"},
                     "the engine measures disagreement instead of drawing it: set 0 and pass "
                     "--rollback");
  }
  o.rollback = args.rollback;
  return o;
}

void warm_up_engine(const engine::Backend& backend, std::span<const engine::EngineRequest> requests,
                    engine::EngineOptions options, int count) {
  if (count <= 0 || requests.empty())
    return;
  std::vector<engine::EngineRequest> first(
      requests.begin(), requests.begin() + std::min<std::ptrdiff_t>(count, std::ssize(requests)));
  for (engine::EngineRequest& r : first)
    r.arrival = 0;
  options.honour_arrivals = false;
  options.observer = {};
  options.step_observer = {};
  engine::Engine engine(backend, std::move(options), nullptr);
  (void)engine.run(first);
}

}  // namespace exitsim::cli
