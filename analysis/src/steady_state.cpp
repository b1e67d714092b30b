#include "exitsim/analysis/steady_state.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exitsim/core/nearest_rank.hpp"
#include "exitsim/sim/metrics/latency_sketch.hpp"

namespace exitsim::analysis {
namespace {

double p99_ms(std::vector<double>& values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const std::int64_t rank = core::nearest_rank(0.99, static_cast<std::int64_t>(values.size()));
  return values[static_cast<std::size_t>(rank - 1)] / static_cast<double>(k_ns_per_ms);
}

struct Trend {
  double first = 0, last = 0;  // the first and last batch means
  double t = 0;                // the slope's t statistic
  double rise = 0;             // the fitted rise from the first batch to the last
};

// Ordinary least squares of the batch means of `values` on the batch index.
Trend batch_means_trend(std::span<const double> values, int batches) {
  const auto b = static_cast<std::size_t>(batches);
  std::vector<double> means(b, 0);
  for (std::size_t k = 0; k < b; ++k) {
    const std::size_t from = k * values.size() / b;
    const std::size_t to = (k + 1) * values.size() / b;
    for (std::size_t i = from; i < to; ++i)
      means[k] += values[i];
    means[k] /= static_cast<double>(std::max<std::size_t>(to - from, 1));
  }
  const double x_mean = (static_cast<double>(b) - 1) / 2;
  double y_mean = 0;
  for (const double m : means)
    y_mean += m / static_cast<double>(b);
  double sxx = 0, sxy = 0;
  for (std::size_t k = 0; k < b; ++k) {
    sxx += (static_cast<double>(k) - x_mean) * (static_cast<double>(k) - x_mean);
    sxy += (static_cast<double>(k) - x_mean) * (means[k] - y_mean);
  }
  Trend out;
  out.first = means.front();
  out.last = means.back();
  const double slope = sxy / sxx;
  double residual = 0;
  for (std::size_t k = 0; k < b; ++k) {
    const double fit = y_mean + slope * (static_cast<double>(k) - x_mean);
    residual += (means[k] - fit) * (means[k] - fit);
  }
  const double se = std::sqrt(residual / (static_cast<double>(b) - 2) / sxx);
  // A perfect line: its trend is certain, whichever way it points.
  out.t = se > 0      ? slope / se
          : slope > 0 ? std::numeric_limits<double>::infinity()
          : slope < 0 ? -std::numeric_limits<double>::infinity()
                      : 0;
  out.rise = slope * (static_cast<double>(b) - 1);
  return out;
}

}  // namespace

SteadyState steady_state(std::span<const sim::RequestRecord> requests, const sim::SloTargets& slo,
                         const SteadyStateOptions& options) {
  std::vector<sim::RequestRecord> by_arrival(requests.begin(), requests.end());
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  const std::size_t n = by_arrival.size();
  const bool short_run = n < 20;
  const std::size_t cut =
      short_run ? std::size_t{0} : static_cast<std::size_t>(static_cast<double>(n) * options.trim);
  std::size_t begin = cut;
  const std::size_t end = n - cut;
  SteadyState out;
  double median_e2e_ms = 0;
  if (n > 0) {
    std::vector<TimeNs> e2e;
    for (const sim::RequestRecord& r : by_arrival)
      e2e.push_back(r.completion - r.arrival);
    std::nth_element(e2e.begin(), e2e.begin() + static_cast<std::ptrdiff_t>(n / 2), e2e.end());
    median_e2e_ms = static_cast<double>(e2e[n / 2]) / static_cast<double>(k_ns_per_ms);
    // The system fills in about a request's time in it: arrivals before two median E2E
    // latencies into the run still see it filling, so they are warm-up too.
    const TimeNs filled = by_arrival.front().arrival + 2 * e2e[n / 2];
    while (!short_run && begin < end && by_arrival[begin].arrival < filled)
      ++begin;
    out.warm_up_requests = begin;
  }
  out.requests = end - begin;
  // Too short a window to judge a trend: the run is mostly warm-up.
  out.window_too_short = !short_run && out.requests < n / 3;
  if (out.requests == 0)
    return out;

  std::size_t met = 0;
  double output_tokens = 0;
  std::vector<double> ttft, tpot, queueing;
  for (std::size_t i = begin; i < end; ++i) {
    const sim::RequestRecord& r = by_arrival[i];
    met += sim::meets_slo(r, slo) ? 1U : 0U;
    output_tokens += static_cast<double>(r.output_tokens);
    ttft.push_back(static_cast<double>(r.first_token - r.arrival));
    queueing.push_back(static_cast<double>(r.first_scheduled - r.arrival) /
                       static_cast<double>(k_ns_per_ms));
    if (r.output_tokens > 1) {
      tpot.push_back(static_cast<double>(r.completion - r.first_token) /
                     static_cast<double>(r.output_tokens - 1));
    }
  }
  out.attainment = static_cast<double>(met) / static_cast<double>(out.requests);
  const double span_s =
      static_cast<double>(by_arrival[end - 1].arrival - by_arrival[begin].arrival) /
      static_cast<double>(k_ns_per_s);
  if (out.requests > 1 && span_s > 0) {
    out.requests_per_s = static_cast<double>(out.requests - 1) / span_s;
    out.output_tokens_per_s =
        output_tokens *
        (static_cast<double>(out.requests - 1) / static_cast<double>(out.requests)) / span_s;
  }
  if (!short_run && !out.window_too_short &&
      out.requests >= 2 * static_cast<std::size_t>(options.batches)) {
    const Trend trend = batch_means_trend(queueing, options.batches);
    out.queue_delay_first_ms = trend.first;
    out.queue_delay_last_ms = trend.last;
    out.queue_trend_t = trend.t;
    out.queue_rise_ms = trend.rise;
    out.queue_growing =
        trend.t > options.trend_t &&
        trend.rise > std::max(options.min_rise_ms, options.min_rise_fraction * median_e2e_ms);
  }
  out.ttft_p99_ms = p99_ms(ttft);
  out.tpot_p99_ms = p99_ms(tpot);
  return out;
}

double saturation_requests_per_s(std::span<const sim::RequestRecord> requests, double trim) {
  if (requests.size() < 20)
    return 0;
  std::vector<TimeNs> completions;
  for (const sim::RequestRecord& r : requests)
    completions.push_back(r.completion);
  std::sort(completions.begin(), completions.end());
  const auto n = static_cast<double>(completions.size());
  const auto from = static_cast<std::size_t>(n * trim);
  const auto to = std::min(static_cast<std::size_t>(n * (1 - trim)), completions.size() - 1);
  const TimeNs span = completions[to] - completions[from];
  return span > 0 ? static_cast<double>(to - from) * static_cast<double>(k_ns_per_s) /
                        static_cast<double>(span)
                  : 0;
}

}  // namespace exitsim::analysis
