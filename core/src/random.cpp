#include "exitsim/core/random.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace exitsim {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void require_positive(double value, const char* what) {
  if (!(value > 0.0) || !std::isfinite(value)) {
    throw std::invalid_argument(std::string("RandomStream: ") + what + " must be finite and > 0");
  }
}

Xoshiro256StarStar seeded_engine(std::uint64_t seed, std::string_view component) {
  // The seed is mixed before the name hash is folded in, so nearby seeds with related names do
  // not cancel out; a second SplitMix64 then expands the key into four distinct, non-zero words.
  SplitMix64 seed_mixer(seed);
  SplitMix64 filler(seed_mixer.next() ^ fnv1a_64(component));
  Xoshiro256StarStar::State state{};
  for (std::uint64_t& word : state)
    word = filler.next();
  return Xoshiro256StarStar(state);
}

}  // namespace

std::uint64_t Xoshiro256StarStar::next() {
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

RandomStream::RandomStream(std::uint64_t seed, std::string_view component)
    : engine_(seeded_engine(seed, component)) {}

KeyedUniform::KeyedUniform(std::uint64_t seed, std::string_view stream)
    : prefix_(splitmix64_finalize(splitmix64_finalize(seed + k_splitmix64_gamma) +
                                  k_splitmix64_gamma + fnv1a_64(stream))) {}

double keyed_uniform(std::uint64_t seed, std::string_view stream, std::uint64_t a, std::uint64_t b,
                     std::uint64_t c) {
  return KeyedUniform(seed, stream)(a, b, c);
}

double RandomStream::uniform() {
  // The top 53 bits fill a double's significand exactly; the low bits of xoshiro are weaker.
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double RandomStream::uniform_positive() {
  return static_cast<double>((next_u64() >> 11) + 1) * 0x1.0p-53;
}

std::int64_t RandomStream::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (lo > hi)
    throw std::invalid_argument("RandomStream::uniform_int: lo must be <= hi");
  // Work in unsigned arithmetic so that the full int64 range does not overflow.
  const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  std::uint64_t offset = next_u64();
  if (range != std::numeric_limits<std::uint64_t>::max()) {
    // Bitmask rejection: draw within the smallest 2^k - 1 covering the range and retry when
    // above it. Every value is equally likely, and fewer than two draws are needed on average.
    std::uint64_t mask = range;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    offset &= mask;
    while (offset > range)
      offset = next_u64() & mask;
  }
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + offset);
}

double RandomStream::exponential(double rate) {
  require_positive(rate, "exponential rate");
  return -std::log(uniform_positive()) / rate;
}

double RandomStream::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  // Polar method: needs only log and sqrt (sqrt is exactly rounded by IEEE 754), no sin/cos.
  double x = 0.0;
  double y = 0.0;
  double s = 0.0;
  do {
    x = 2.0 * uniform() - 1.0;
    y = 2.0 * uniform() - 1.0;
    s = x * x + y * y;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * std::log(s) / s);
  spare_normal_ = y * factor;
  has_spare_normal_ = true;
  return x * factor;
}

double RandomStream::gamma(double shape, double scale) {
  require_positive(shape, "gamma shape");
  require_positive(scale, "gamma scale");
  if (shape < 1.0) {
    // Marsaglia and Tsang's boost: if G ~ Gamma(k + 1) and U ~ U(0, 1], G * U^(1/k) ~ Gamma(k).
    const double boosted = gamma(shape + 1.0, scale);
    return boosted * std::exp(std::log(uniform_positive()) / shape);
  }
  // Marsaglia and Tsang (2000): a transformed normal, accepted by a cheap squeeze test almost
  // always and by the exact log test otherwise.
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0.0;
    double v = 0.0;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform_positive();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2)
      return d * v * scale;
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v)))
      return d * v * scale;
  }
}

double RandomStream::lognormal(double mu, double sigma) {
  if (!(sigma >= 0.0) || !std::isfinite(sigma) || !std::isfinite(mu)) {
    throw std::invalid_argument("RandomStream::lognormal: mu must be finite and sigma >= 0");
  }
  return std::exp(mu + sigma * normal());
}

}  // namespace exitsim
