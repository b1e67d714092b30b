#include "exitsim/policy/scheduler_registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "exitsim/core/error.hpp"

namespace exitsim::policy {
namespace {

// A user's scheduler: never schedules anything.
class Idle final : public Scheduler {
 public:
  std::string_view name() const override { return "idle_for_test"; }
  void schedule(const SchedulerSnapshot&, SchedulerDecision&) const override {}
};

InputError input_error_of(std::string_view name, const SchedulerParams& params = {}) {
  try {
    make_scheduler(name, params);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError for " << name;
  return InputError({}, "");
}

TEST(SchedulerRegistry, BuiltinsAndExampleAreRegisteredOnFirstUse) {
  const std::vector<std::string> names = scheduler_names();
  for (const char* name : {"chunked_prefill", "continuous", "shortest_prompt_first", "static"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(SchedulerRegistry, EachNameBuildsTheSchedulerOfThatName) {
  for (const char* name : {"chunked_prefill", "continuous", "shortest_prompt_first", "static"}) {
    EXPECT_EQ(make_scheduler(name, {})->name(), name);
  }
}

TEST(SchedulerRegistry, UnknownNameSuggestsTheNearest) {
  const InputError e = input_error_of("contnuous");
  EXPECT_EQ(e.where().field, "scheduler.kind");
  EXPECT_EQ(e.message(), "unknown scheduler \"contnuous\"; did you mean \"continuous\"?");
  EXPECT_EQ(std::string(e.what()),
            "scheduler.kind: unknown scheduler \"contnuous\"; did you mean \"continuous\"?");
}

TEST(SchedulerRegistry, UnknownNameWithoutCloseMatchListsTheChoices) {
  const InputError e = input_error_of("fair_share_by_tenant");
  EXPECT_EQ(e.where().field, "scheduler.kind");
  EXPECT_EQ(e.message().rfind("unknown scheduler \"fair_share_by_tenant\"; expected one of ", 0),
            0u)
      << e.message();
  EXPECT_NE(e.message().find("chunked_prefill, continuous"), std::string::npos) << e.message();
}

// Swap is the executor's business: the scheduler sees a swapped victim as a waiting sequence
// that kept its computed tokens, so every scheduler builds with it.
TEST(SchedulerRegistry, SwapPreemptionBuildsEveryScheduler) {
  for (const char* name : {"chunked_prefill", "continuous", "shortest_prompt_first", "static"}) {
    EXPECT_EQ(make_scheduler(name, {"swap"})->name(), name);
  }
}

TEST(SchedulerRegistry, UnknownPreemptionIsRejected) {
  const InputError e = input_error_of("static", {"evict"});
  EXPECT_EQ(e.where().field, "scheduler.preemption");
  EXPECT_EQ(e.message(), "expected one of recompute, swap, found \"evict\"");
}

TEST(SchedulerRegistry, UserSchedulerIsRegisteredAndBuilt) {
  std::vector<std::string> names = scheduler_names();
  // The registry is process-wide; a repeated run (--gtest_repeat) finds the name already taken.
  if (std::find(names.begin(), names.end(), "idle_for_test") == names.end()) {
    register_scheduler("idle_for_test",
                       [](const SchedulerParams&) { return std::make_unique<Idle>(); });
  }
  EXPECT_EQ(make_scheduler("idle_for_test", {})->name(), "idle_for_test");
  names = scheduler_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "idle_for_test"), names.end());
}

TEST(SchedulerRegistry, TakenOrMalformedNamesAreRefused) {
  const SchedulerFactory idle = [](const SchedulerParams&) { return std::make_unique<Idle>(); };
  EXPECT_THROW(register_scheduler("continuous", idle), std::invalid_argument);
  EXPECT_THROW(register_scheduler("shortest_prompt_first", idle), std::invalid_argument);
  EXPECT_THROW(register_scheduler("", idle), std::invalid_argument);
  EXPECT_THROW(register_scheduler("My-Scheduler", idle), std::invalid_argument);
  EXPECT_THROW(register_scheduler("no_factory", nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace exitsim::policy
