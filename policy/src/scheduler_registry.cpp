#include "exitsim/policy/scheduler_registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/policy/schedulers.hpp"
#include "exitsim/policy/shortest_prompt_first.hpp"

namespace exitsim::policy {
namespace {

// Recursive because loading the built-ins registers the worked example through the public
// register_scheduler(), which takes the lock again on the same thread.
struct Registry {
  std::recursive_mutex mutex;
  std::map<std::string, SchedulerFactory, std::less<>> factories;
  bool builtins_loaded = false;
};

// A function-local static, filled on first use: registration objects at namespace scope would
// be dropped by the linker from a static library that nothing else references.
Registry& registry() {
  static Registry instance;
  return instance;
}

// Caller holds the lock.
void load_builtins(Registry& r) {
  if (r.builtins_loaded)
    return;
  r.builtins_loaded = true;
  r.factories.emplace("static",
                      [](const SchedulerParams&) { return std::make_unique<StaticBatching>(); });
  r.factories.emplace("continuous", [](const SchedulerParams& p) {
    return std::make_unique<ContinuousBatching>(ContinuousBatching::Params{p.watermark_fraction});
  });
  r.factories.emplace("chunked_prefill", [](const SchedulerParams& p) {
    return std::make_unique<ChunkedPrefill>(
        ChunkedPrefill::Params{p.watermark_fraction, p.reserve_prompt_blocks});
  });
  // The worked example goes through the path a user's own scheduler takes.
  register_shortest_prompt_first();
}

bool is_scheduler_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

void check_params(const SchedulerParams& params) {
  const SourceLocation where{"", 0, 0, "scheduler.preemption"};
  // Swap is the executor's: the scheduler sees a swapped victim as a waiting sequence that keeps
  // its computed tokens.
  if (params.preemption != "recompute" && params.preemption != "swap") {
    throw InputError(where,
                     expected_found("one of recompute, swap", "\"" + params.preemption + "\""));
  }
}

}  // namespace

void register_scheduler(const std::string& name, SchedulerFactory factory) {
  if (!is_scheduler_name(name)) {
    throw std::invalid_argument("scheduler name \"" + name +
                                "\" is not an identifier (lowercase letters, digits and _)");
  }
  if (!factory)
    throw std::invalid_argument("scheduler \"" + name + "\" has no factory");
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  load_builtins(r);
  if (!r.factories.emplace(name, std::move(factory)).second) {
    throw std::invalid_argument("scheduler \"" + name + "\" is already registered");
  }
}

std::vector<std::string> scheduler_names() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  load_builtins(r);
  std::vector<std::string> names;
  names.reserve(r.factories.size());
  for (const auto& entry : r.factories)
    names.push_back(entry.first);
  return names;
}

std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const SchedulerParams& params) {
  SchedulerFactory factory;
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    load_builtins(r);
    const auto found = r.factories.find(name);
    if (found != r.factories.end())
      factory = found->second;
  }
  if (!factory) {
    const std::vector<std::string> names = scheduler_names();
    const std::string suggestion = nearest_match(name, names);
    std::string message = "unknown scheduler \"" + std::string(name) + "\"; ";
    message +=
        suggestion.empty() ? "expected " + one_of(names) : "did you mean \"" + suggestion + "\"?";
    throw InputError({"", 0, 0, "scheduler.kind"}, message);
  }
  check_params(params);
  std::unique_ptr<Scheduler> scheduler = factory(params);
  if (!scheduler) {
    throw std::logic_error("scheduler factory for \"" + std::string(name) + "\" returned null");
  }
  return scheduler;
}

}  // namespace exitsim::policy
