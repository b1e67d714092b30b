// The CPU backend's thread count and pinning: applied, recorded in the hardware name (so a
// profile of another thread count is refused), and refused when impossible.
#include "exitsim/engine/cpu_threads.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include "exitsim/core/error.hpp"

namespace exitsim::engine {
namespace {

int cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return CPU_COUNT(&set);
}

TEST(CpuThreads, TheCountIsAppliedAndDescribed) {
  apply_cpu_threading({1, false});
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(cpu_threading_description(), "1 thread");
  if (cpus_allowed() >= 2) {
    apply_cpu_threading({2, false});
    EXPECT_EQ(omp_get_max_threads(), 2);
    EXPECT_EQ(cpu_threading_description(), "2 threads");
  }
}

TEST(CpuThreads, PinningBindsTheCallingThreadToOneCpu) {
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  apply_cpu_threading({1, true});
  EXPECT_EQ(cpus_allowed(), 1);
  EXPECT_EQ(cpu_threading_description(), "1 thread, pinned");
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);  // the other tests run free
}

TEST(CpuThreads, ImpossibleSettingsAreRefusedNamingTheOption) {
  EXPECT_THROW(apply_cpu_threading({-1, false}), InputError);
  try {
    apply_cpu_threading({cpus_allowed() + 1, true});
    FAIL() << "pinning more threads than CPUs was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--threads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace exitsim::engine
