#include "exitsim/analysis/steady_state.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace exitsim::analysis {
namespace {

double p99_ms(std::vector<double>& values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank, with the same slack against binary rounding as the latency sketch.
  const auto rank =
      static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(values.size()) - 1e-9));
  return values[std::max<std::size_t>(rank, 1) - 1] / static_cast<double>(k_ns_per_ms);
}

}  // namespace

SteadyState steady_state(std::span<const sim::RequestRecord> requests, const sim::SloTargets& slo,
                         const SteadyStateOptions& options) {
  std::vector<sim::RequestRecord> by_arrival(requests.begin(), requests.end());
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  std::vector<TimeNs> completions;
  completions.reserve(by_arrival.size());
  for (const sim::RequestRecord& r : by_arrival)
    completions.push_back(r.completion);
  std::sort(completions.begin(), completions.end());

  const std::size_t n = by_arrival.size();
  const bool short_run = n < 20;
  const std::size_t cut =
      short_run ? std::size_t{0} : static_cast<std::size_t>(static_cast<double>(n) * options.trim);
  std::size_t begin = cut;
  const std::size_t end = n - cut;
  SteadyState out;
  if (!short_run) {
    // The system fills in about a request's time in it: arrivals before two median E2E latencies
    // into the run still see it filling, so they are warm-up too.
    std::vector<TimeNs> e2e;
    for (const sim::RequestRecord& r : by_arrival)
      e2e.push_back(r.completion - r.arrival);
    std::nth_element(e2e.begin(), e2e.begin() + static_cast<std::ptrdiff_t>(n / 2), e2e.end());
    const TimeNs filled = by_arrival.front().arrival + 2 * e2e[n / 2];
    while (begin < end && by_arrival[begin].arrival < filled)
      ++begin;
    out.warm_up_requests = begin;
  }
  out.requests = end - begin;
  // Too short a window to judge a trend: the run is mostly warm-up.
  out.window_too_short = !short_run && out.requests < n / 3;
  if (out.requests == 0)
    return out;

  std::size_t met = 0;
  std::vector<double> ttft, tpot;
  double first = 0, second = 0;
  // The window's first and last thirds: the middle third separates them, so that a queue that
  // is merely noisy does not look like one that grows.
  const std::size_t first_end = begin + out.requests / 3;
  const std::size_t last_begin = end - out.requests / 3;
  for (std::size_t i = begin; i < end; ++i) {
    const sim::RequestRecord& r = by_arrival[i];
    met += sim::meets_slo(r, slo) ? 1U : 0U;
    ttft.push_back(static_cast<double>(r.first_token - r.arrival));
    if (r.output_tokens > 1) {
      tpot.push_back(static_cast<double>(r.completion - r.first_token) /
                     static_cast<double>(r.output_tokens - 1));
    }
    // In the system when it arrives: those that arrived before it, less those done by then.
    const auto done = static_cast<double>(
        std::upper_bound(completions.begin(), completions.end(), r.arrival) - completions.begin());
    const double in_system = static_cast<double>(i) - done;
    if (i < first_end)
      first += in_system;
    else if (i >= last_begin)
      second += in_system;
  }
  out.attainment = static_cast<double>(met) / static_cast<double>(out.requests);
  const auto third = static_cast<double>(first_end - begin);
  out.in_system_first_half = third > 0 ? first / third : 0;
  out.in_system_second_half = third > 0 ? second / third : 0;
  out.queue_growing = !short_run && !out.window_too_short &&
                      out.in_system_second_half >
                          options.growth_ratio * out.in_system_first_half + options.growth_slack;
  out.ttft_p99_ms = p99_ms(ttft);
  out.tpot_p99_ms = p99_ms(tpot);
  return out;
}

}  // namespace exitsim::analysis
