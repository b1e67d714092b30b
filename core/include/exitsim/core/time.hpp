#pragma once

#include <cstdint>

namespace exitsim {

// Simulated and measured time is an integer count of nanoseconds. Integers keep event ordering
// exact and runs byte-identical across machines and compilers: floating-point seconds lose
// resolution as the clock grows (a double has ~0.1 us steps after a day of simulated time) and
// their sums depend on evaluation order. Nanoseconds match what CUPTI and steady_clock report,
// and int64 covers about 292 years, far beyond any trace.
using TimeNs = std::int64_t;

inline constexpr TimeNs k_ns_per_us = 1'000;
inline constexpr TimeNs k_ns_per_ms = 1'000'000;
inline constexpr TimeNs k_ns_per_s = 1'000'000'000;

// The latest arrival a workload may have, relative to its first request: 2^62 ns, about 146
// years. Every trace reader and arrival process refuses later ones, naming the key, so that the
// other half of the int64 clock is the run's own headroom: the iterations after the last
// arrival and an arrival plus a latency never leave int64.
inline constexpr TimeNs k_max_arrival_ns = TimeNs{1} << 62;
// The latest time an iteration may end: 1.5 x 2^62 ns (about 219 years). The quarter of the clock
// above it keeps an iteration end plus a link latency (at most 1e6 us) within int64; a run that
// would pass it is refused as too slow for its workload, not wrapped.
inline constexpr TimeNs k_max_iteration_end_ns = k_max_arrival_ns + (k_max_arrival_ns >> 1);

constexpr double to_seconds(TimeNs t) {
  return static_cast<double>(t) / 1e9;
}
constexpr double to_milliseconds(TimeNs t) {
  return static_cast<double>(t) / 1e6;
}
constexpr double to_microseconds(TimeNs t) {
  return static_cast<double>(t) / 1e3;
}

// Rounds to the nearest nanosecond; callers validate the range of user-supplied values first.
constexpr TimeNs from_seconds(double seconds) {
  const double ns = seconds * 1e9;
  return static_cast<TimeNs>(ns < 0 ? ns - 0.5 : ns + 0.5);
}
constexpr TimeNs from_milliseconds(double ms) {
  return from_seconds(ms / 1e3);
}
constexpr TimeNs from_microseconds(double us) {
  return from_seconds(us / 1e6);
}

}  // namespace exitsim
