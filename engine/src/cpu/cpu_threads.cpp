#include "exitsim/engine/cpu_threads.hpp"

#include <omp.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <vector>

#include "exitsim/core/error.hpp"

namespace exitsim::engine {

namespace {

// Set once the threads are bound (pinning is per thread, and OpenMP keeps its pool's threads).
std::atomic<bool> g_pinned{false};

std::vector<std::size_t> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<std::size_t> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return cpus;
  for (std::size_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set))
      cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

void apply_cpu_threading(const CpuThreading& threading) {
  if (threading.threads < 0) {
    throw InputError({"", 0, 0, "--threads"},
                     expected_found("a thread count >= 1 (or 0: OpenMP's choice)",
                                    std::to_string(threading.threads)));
  }
  if (threading.threads > 0)
    omp_set_num_threads(threading.threads);
  if (!threading.pin)
    return;
  const std::vector<std::size_t> cpus = allowed_cpus();
  const int threads = omp_get_max_threads();
  if (cpus.empty() || static_cast<int>(cpus.size()) < threads) {
    throw InputError({"", 0, 0, "--threads"},
                     expected_found(std::to_string(cpus.size()) +
                                        " at most with --pin (the CPUs this process may run on)",
                                    std::to_string(threads)));
  }
  // Every thread of the pool binds itself to its own CPU; the main thread is thread 0.
  bool all_bound = true;
#pragma omp parallel num_threads(threads) reduction(&& : all_bound)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(omp_get_thread_num())], &one);
    all_bound = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  g_pinned = all_bound;
}

std::string cpu_threading_description() {
  const int threads = omp_get_max_threads();
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
         (g_pinned ? ", pinned" : "");
}

}  // namespace exitsim::engine
