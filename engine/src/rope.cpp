#include "exitsim/engine/rope.hpp"

#include <cmath>
#include <numbers>

namespace exitsim::engine {
namespace {

// Llama 3.1's scaling of one frequency (Meta's apply_scaling, written out here). A frequency
// that turns many times within the original context (a short wavelength) already saw every
// phase in training and is kept; one that turned less than once is divided by `factor`, so the
// longer context maps onto the phases it saw; in between the two are blended linearly in the
// number of turns.
double llama3_scaled(double inv_freq, const RopeScaling& s) {
  const auto original = static_cast<double>(s.original_max_position_embeddings);
  const double wavelength = 2.0 * std::numbers::pi / inv_freq;
  const double high_freq_wavelength = original / s.high_freq_factor;
  const double low_freq_wavelength = original / s.low_freq_factor;
  if (wavelength < high_freq_wavelength)
    return inv_freq;
  if (wavelength > low_freq_wavelength)
    return inv_freq / s.factor;
  const double smooth =
      (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

std::string_view to_string(RopeScalingKind kind) {
  return kind == RopeScalingKind::llama3 ? "llama3" : "none";
}

std::vector<float> rotary_inv_freq(std::int64_t head_dim, double theta,
                                   const RopeScaling& scaling) {
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t j = 0; j < inv_freq.size(); ++j) {
    double f = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
    if (scaling.kind == RopeScalingKind::llama3)
      f = llama3_scaled(f, scaling);
    inv_freq[j] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace exitsim::engine
