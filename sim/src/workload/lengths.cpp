#include "exitsim/sim/workload/lengths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/core/request.hpp"
#include "exitsim/core/suggest.hpp"
#include "exitsim/traces/request_trace.hpp"

namespace exitsim::sim {
namespace {

// A length a trace could not hold either (k_max_request_tokens) is refused, not clamped: lengths
// are summed with others, and 2^63 - 1 input tokens wrapped around.
void check_at_most_max_tokens(std::int64_t value, const std::string& key) {
  if (value > k_max_request_tokens) {
    throw_setting_error(key, fmt::format("at most {} tokens", k_max_request_tokens),
                        fmt::format("{}", value));
  }
}

LengthBounds bounds_of(const scenario::LengthConfig& config, const std::string& key) {
  check_at_most_max_tokens(config.min, key + ".min");
  check_at_most_max_tokens(config.max, key + ".max");
  if (config.max < 0) {
    throw_setting_error(key + ".max", "an upper bound >= 0 (0 = none)",
                        fmt::format("{}", config.max));
  }
  if (config.max > 0 && config.min > config.max) {
    throw_setting_error(key + ".min", fmt::format("a value <= max ({})", config.max),
                        fmt::format("{}", config.min));
  }
  LengthBounds bounds;
  bounds.lo = std::max<std::int64_t>(1, config.min);
  if (config.max > 0)
    bounds.hi = config.max;
  bounds.key = key;
  return bounds;
}

std::vector<std::int64_t> read_observed_lengths(const scenario::LengthConfig& config,
                                                const std::string& key) {
  if (config.path.empty()) {
    throw_setting_error(key + ".path", "a request trace file for the empirical distribution",
                        "an empty path");
  }
  const bool input = config.column == "input";
  if (!input && config.column != "output") {
    throw_setting_error(key + ".column", "input or output", fmt::format("'{}'", config.column));
  }
  std::vector<std::int64_t> observed;
  const std::unique_ptr<traces::RequestSource> source = traces::open_request_trace(config.path);
  while (const std::optional<RequestDescriptor> request = source->next()) {
    observed.push_back(input ? request->input_tokens : request->output_tokens);
  }
  if (observed.empty()) {
    throw_setting_error(key + ".path", "a request trace with at least one request",
                        fmt::format("none in '{}'", config.path));
  }
  return observed;
}

}  // namespace

std::int64_t LengthBounds::clamp(std::int64_t length) const {
  return std::clamp(length, lo, hi);
}

std::int64_t LengthBounds::clamp_rounded(double length) const {
  const double rounded = std::floor(length + 0.5);
  // Without a maximum, a draw beyond any request's length is the configuration's mistake (a mean
  // of 1e30, a sigma of 10), said rather than clamped to a number nobody asked for.
  if (hi > k_max_request_tokens && rounded > static_cast<double>(k_max_request_tokens)) {
    throw_setting_error(
        key + ".max",
        fmt::format("a maximum (lengths drawn stay at most {} tokens)", k_max_request_tokens),
        fmt::format("none, and a draw of {:.4g} tokens", rounded));
  }
  // Compare in double before converting: a cast of an out-of-range double is undefined.
  if (!(rounded > static_cast<double>(lo)))
    return lo;
  if (!(rounded < static_cast<double>(hi)))
    return hi;
  return static_cast<std::int64_t>(rounded);
}

LognormalLength::LognormalLength(double mean, double sigma, LengthBounds bounds, RandomStream rng)
    : LengthDistribution(bounds),
      mu_(std::log(mean) - 0.5 * sigma * sigma),
      sigma_(sigma),
      rng_(rng) {}

std::int64_t LognormalLength::sample() {
  return clamp_rounded(rng_.lognormal(mu_, sigma_));
}

EmpiricalLength::EmpiricalLength(std::vector<std::int64_t> observed, LengthBounds bounds,
                                 RandomStream rng)
    : LengthDistribution(bounds), observed_(std::move(observed)), rng_(rng) {}

std::int64_t EmpiricalLength::sample() {
  const auto last = static_cast<std::int64_t>(observed_.size()) - 1;
  return clamp(observed_[static_cast<std::size_t>(rng_.uniform_int(0, last))]);
}

std::vector<std::string> length_distribution_names() {
  return {"fixed", "uniform", "lognormal", "empirical"};
}

std::unique_ptr<LengthDistribution> make_length_distribution(const scenario::LengthConfig& config,
                                                             const std::string& key,
                                                             RandomStream rng) {
  const std::vector<std::string> names = length_distribution_names();
  if (std::find(names.begin(), names.end(), config.dist) == names.end()) {
    std::string found = fmt::format("'{}'", config.dist);
    const std::string hint = nearest_match(config.dist, names);
    if (!hint.empty())
      found += fmt::format(" (did you mean '{}'?)", hint);
    throw_setting_error(key + ".dist", one_of(names), found);
  }
  const LengthBounds bounds = bounds_of(config, key);
  if (config.dist == "fixed") {
    if (config.value < 1) {
      throw_setting_error(key + ".value", "a length >= 1 token", fmt::format("{}", config.value));
    }
    check_at_most_max_tokens(config.value, key + ".value");
    return std::make_unique<FixedLength>(config.value);
  }
  if (config.dist == "uniform") {
    if (config.max == 0) {
      throw_setting_error(key + ".max", "an upper bound >= 1 (uniform needs one)", "0");
    }
    return std::make_unique<UniformLength>(bounds, rng);
  }
  if (config.dist == "lognormal") {
    if (!(config.mean >= 1.0) || !(config.mean <= static_cast<double>(k_max_request_tokens))) {
      throw_setting_error(key + ".mean",
                          fmt::format("a mean from 1 to {} tokens", k_max_request_tokens),
                          fmt::format("{}", config.mean));
    }
    if (!(config.sigma >= 0.0) || !std::isfinite(config.sigma)) {
      throw_setting_error(key + ".sigma", "a standard deviation of log(length) >= 0",
                          fmt::format("{}", config.sigma));
    }
    return std::make_unique<LognormalLength>(config.mean, config.sigma, bounds, rng);
  }
  return std::make_unique<EmpiricalLength>(read_observed_lengths(config, key), bounds, rng);
}

}  // namespace exitsim::sim
