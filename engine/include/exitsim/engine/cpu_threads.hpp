#pragma once
// How many OpenMP threads the CPU backend computes with, and whether each is pinned to a core:
// the two settings that decide how steady the engine's timing is on a shared machine.

#include <string>

namespace exitsim::engine {

struct CpuThreading {
  int threads = 0;   // 0: OpenMP's own choice (OMP_NUM_THREADS, else every core)
  bool pin = false;  // bind thread i to the i-th CPU this process may run on
};

// Applies `threading` to the process's OpenMP threads; throws InputError (key `--threads`)
// for a negative count, or for pinning more threads than the CPUs this process may run on.
void apply_cpu_threading(const CpuThreading& threading);

// "2 threads, pinned", "1 thread": what the CPU backend's timing was measured with. Part of
// the profile's hardware name, so a simulation priced by another thread count is refused.
std::string cpu_threading_description();

}  // namespace exitsim::engine
