#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "exitsim/core/random.hpp"
#include "exitsim/scenario/scenario.hpp"

namespace exitsim::sim {

// The range every sampled length is clamped to: [lo, hi] with lo >= 1.
struct LengthBounds {
  std::int64_t lo = 1;
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  std::string key{};  // the scenario key of the distribution, named by a refused draw

  std::int64_t clamp(std::int64_t length) const;
  // Rounds to the nearest integer, then clamps; safe for any double, including huge ones.
  std::int64_t clamp_rounded(double length) const;
};

// A distribution of token counts (prompt or output lengths). Each instance owns its random
// stream, so sampling one never changes the numbers another produces.
class LengthDistribution {
 public:
  virtual ~LengthDistribution() = default;
  virtual std::int64_t sample() = 0;
  // Samples moved to a bound so far (the distribution drew a length outside [min, max]).
  std::int64_t clamped() const { return clamped_; }
  LengthBounds bounds() const { return bounds_; }

 protected:
  LengthDistribution() = default;
  explicit LengthDistribution(LengthBounds bounds) : bounds_(bounds) {}
  std::int64_t clamp(std::int64_t length) {
    const std::int64_t out = bounds_.clamp(length);
    clamped_ += out != length ? 1 : 0;
    return out;
  }
  std::int64_t clamp_rounded(double length) {
    const std::int64_t out = bounds_.clamp_rounded(length);
    clamped_ += static_cast<double>(out) != std::floor(length + 0.5) ? 1 : 0;
    return out;
  }

 private:
  LengthBounds bounds_;
  std::int64_t clamped_ = 0;
};

class FixedLength final : public LengthDistribution {
 public:
  explicit FixedLength(std::int64_t value) : value_(value) {}
  std::int64_t sample() override { return value_; }

 private:
  std::int64_t value_;
};

// Uniform integers in [bounds.lo, bounds.hi].
class UniformLength final : public LengthDistribution {
 public:
  UniformLength(LengthBounds bounds, RandomStream rng) : LengthDistribution(bounds), rng_(rng) {}
  std::int64_t sample() override { return rng_.uniform_int(bounds().lo, bounds().hi); }

 private:
  RandomStream rng_;
};

// Lognormal parameterised by its mean in tokens and sigma, the standard deviation of
// log(length): mu = ln(mean) - sigma^2 / 2 makes E[length] = mean before rounding and clamping.
class LognormalLength final : public LengthDistribution {
 public:
  LognormalLength(double mean, double sigma, LengthBounds bounds, RandomStream rng);
  std::int64_t sample() override;

 private:
  double mu_;
  double sigma_;
  RandomStream rng_;
};

// Resamples (with replacement, uniformly) from observed lengths. Precondition: not empty.
class EmpiricalLength final : public LengthDistribution {
 public:
  EmpiricalLength(std::vector<std::int64_t> observed, LengthBounds bounds, RandomStream rng);
  std::int64_t sample() override;

 private:
  std::vector<std::int64_t> observed_;
  RandomStream rng_;
};

// The names `<lengths>.dist` accepts.
std::vector<std::string> length_distribution_names();

// Builds the distribution `config` describes. `key` is its scenario key path
// ("workload.input_tokens"), used in InputError fields. Throws InputError on an unknown dist,
// max < 0, min > max, uniform without max, fixed value < 1, lognormal mean < 1 or sigma < 0, and
// for empirical on a missing path, a column other than input/output, or a trace with no requests.
// Empirical reads the whole file (format detected from its header) into memory.
std::unique_ptr<LengthDistribution> make_length_distribution(const scenario::LengthConfig& config,
                                                             const std::string& key,
                                                             RandomStream rng);

}  // namespace exitsim::sim
