#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace exitsim {

// Random numbers for simulation. Every component draws from its own stream, derived from the
// scenario seed and the component's name alone, so adding, removing or reordering components
// never shifts another component's numbers. The generator and every sampler are implemented here
// rather than taken from <random>: the std:: distributions are implementation-defined and give
// different numbers under libstdc++, libc++ and MSVC. What remains platform-dependent is libm's
// log/exp (used by the continuous samplers); uniform draws are bit-exact everywhere.

// 64-bit FNV-1a of `text`: a fixed, portable hash (std::hash may differ between libraries).
constexpr std::uint64_t fnv1a_64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// SplitMix64's increment (2^64 over the golden ratio) and its output finalizer, shared by the
// generator below and the keyed draws (KeyedUniform).
inline constexpr std::uint64_t k_splitmix64_gamma = 0x9e3779b97f4a7c15ULL;
inline std::uint64_t splitmix64_finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// SplitMix64 (Steele, Lea, Flood 2014): turns any 64-bit seed, however regular, into well-mixed
// words; used only to fill the state of the main generator.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    state_ += k_splitmix64_gamma;
    return splitmix64_finalize(state_);
  }

 private:
  std::uint64_t state_;
};

// SplitMix64's output for state `x`: a well-mixed 64-bit function of x (distinct inputs give
// well-spread values), for names built from numbers (block hashes).
inline std::uint64_t splitmix64(std::uint64_t x) {
  return SplitMix64(x).next();
}

// xoshiro256** (Blackman, Vigna 2018): 256-bit state, period 2^256 - 1, passes BigCrush, and is a
// handful of shifts and multiplies per draw. The state must not be all zero.
class Xoshiro256StarStar {
 public:
  using State = std::array<std::uint64_t, 4>;

  explicit Xoshiro256StarStar(const State& state) : state_(state) {}
  std::uint64_t next();
  const State& state() const { return state_; }

 private:
  State state_;
};

// One component's random stream with the samplers the simulator needs. Samplers throw
// std::invalid_argument on parameters outside their domain; user-facing configuration is
// validated (with InputError) before it reaches them.
class RandomStream {
 public:
  // The stream named `component` (e.g. "workload.arrivals") of the run seeded with `seed`.
  RandomStream(std::uint64_t seed, std::string_view component);
  explicit RandomStream(const Xoshiro256StarStar& engine) : engine_(engine) {}

  std::uint64_t next_u64() { return engine_.next(); }
  // Uniform on [0, 1) with 53 random bits: every value is a multiple of 2^-53.
  double uniform();
  // Uniform on (0, 1]: safe to take the logarithm of.
  double uniform_positive();
  // Uniform integer in [lo, hi] (inclusive, lo <= hi), without modulo bias.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  // Exponential with the given rate (> 0); mean 1/rate.
  double exponential(double rate);
  // Standard normal (Marsaglia's polar method; the second value of each pair is kept for the
  // next call, so the stream stays a pure function of its seed and call sequence).
  double normal();
  double normal(double mean, double stddev) { return mean + stddev * normal(); }
  // Gamma with shape k > 0 and scale theta > 0: mean k*theta, variance k*theta^2.
  double gamma(double shape, double scale);
  // exp(N(mu, sigma^2)); sigma >= 0.
  double lognormal(double mu, double sigma);

 private:
  Xoshiro256StarStar engine_;
  double spare_normal_ = 0.0;
  bool has_spare_normal_ = false;
};

// Counter-based draws: a uniform on [0, 1) that is a pure function of (seed, stream, key), for
// decisions that must not depend on the order they are made in. A token's exit draw keyed by
// (request, position, exit point) is the same in the engine and the simulator, whatever else is
// in its batch, whichever replica serves it and whatever the strategy or scheduler; each key
// word goes through SplitMix64's finalizer, so neighbouring keys give unrelated numbers.
double keyed_uniform(std::uint64_t seed, std::string_view stream, std::uint64_t a, std::uint64_t b,
                     std::uint64_t c);

// keyed_uniform with its (seed, stream) part hashed once: the same numbers, for draws made per
// token on the simulator's hot path (defined here so that they inline into its loops).
class KeyedUniform {
 public:
  KeyedUniform(std::uint64_t seed, std::string_view stream);
  double operator()(std::uint64_t a, std::uint64_t b, std::uint64_t c) const {
    std::uint64_t h = prefix_;
    for (const std::uint64_t word : {a, b, c})
      h = splitmix64_finalize(h + k_splitmix64_gamma + word);
    return to_uniform(h);
  }
  // out[c] = (*this)(a, b, c) for c = 0, 1, ...: the key's (a, b) part hashed once.
  void fill(std::uint64_t a, std::uint64_t b, std::span<double> out) const {
    const std::uint64_t ab = splitmix64_finalize(
        splitmix64_finalize(prefix_ + k_splitmix64_gamma + a) + k_splitmix64_gamma + b);
    for (std::size_t c = 0; c < out.size(); ++c)
      out[c] = to_uniform(splitmix64_finalize(ab + k_splitmix64_gamma + c));
  }

 private:
  // The top 53 bits fill a double's significand exactly.
  static double to_uniform(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

  std::uint64_t prefix_;
};

}  // namespace exitsim
