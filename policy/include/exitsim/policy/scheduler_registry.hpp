#pragma once

// The extension point for user-designed schedulers. Write a class deriving from
// policy::Scheduler (see scheduler.hpp and the worked example in docs/schedulers.md), then
// register a factory under a name before the scenario is loaded:
//
//   exitsim::policy::register_scheduler("my_scheduler", [](const SchedulerParams& p) {
//     return std::make_unique<MyScheduler>(p);
//   });
//
// and select it with `scheduler.kind: my_scheduler`. The simulator and the engine both build
// their scheduler through this registry, so the registered design runs unchanged in each.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/policy/scheduler.hpp"
#include "exitsim/policy/scheduler_steps.hpp"

namespace exitsim::policy {

// Construction-time parameters every scheduler receives (from the scenario's scheduler section).
struct SchedulerParams {
  std::string preemption = "recompute";                      // recompute | swap
  double watermark_fraction = k_default_watermark_fraction;  // of K/V blocks kept free
  bool reserve_prompt_blocks = false;  // chunked_prefill: see ChunkedPrefill::Params
};

using SchedulerFactory = std::function<std::unique_ptr<Scheduler>(const SchedulerParams&)>;

// Throws std::invalid_argument if the name is taken or not an identifier ([a-z0-9_]+).
void register_scheduler(const std::string& name, SchedulerFactory factory);

// Built-in and registered names, sorted.
std::vector<std::string> scheduler_names();

// Throws InputError (field "scheduler.kind") naming the nearest registered name when unknown,
// and InputError (field "scheduler.preemption") for a value other than "recompute" or "swap"
// (swap is the executor's: a swapped victim waits with its computed tokens). The built-ins are
// registered on the first call of any of these functions; all three are safe to call from several
// threads.
std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const SchedulerParams& params);

}  // namespace exitsim::policy
