// Llama 3.1's "llama3" rotary frequency scaling (engine/src/rope.cpp): the table against a
// reference computed here in long double from a different formulation (turns per original
// context instead of wavelengths) and against hand-derived values, the CPU rotation with the table
// against a direct long-double rotation at large positions, and a model with the scaling against
// the same model without it and against the double-precision reference forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/cpu_ops.hpp"
#include "exitsim/engine/rope.hpp"
#include "support/layer_calls.hpp"
#include "support/support_model.hpp"

namespace exitsim::engine {
namespace {

constexpr long double k_pi = std::numbers::pi_v<long double>;

// Llama 3.1 8B's rotary settings: head_dim 128, theta 500000, factor 8, low 1, high 4, original
// context 8192.
constexpr std::int64_t k_head_dim = 128;
constexpr double k_theta = 500000.0;
const RopeScaling k_llama31{.kind = RopeScalingKind::llama3,
                            .factor = 8.0,
                            .low_freq_factor = 1.0,
                            .high_freq_factor = 4.0,
                            .original_max_position_embeddings = 8192};

// Unscaled frequency j, in long double through exp and log rather than pow.
long double plain_frequency(std::int64_t j, std::int64_t head_dim, long double theta) {
  return std::exp(-2.0L * static_cast<long double>(j) / static_cast<long double>(head_dim) *
                  std::log(theta));
}

// The llama3 scaling from the number of turns a frequency makes within the original context:
// turns = original * f / (2 pi). More than high_freq_factor turns keep f, fewer than
// low_freq_factor divide it by the factor, and in between the kept share
// (turns - low) / (high - low) grows linearly: f * (share + (1 - share) / factor).
long double reference_frequency(std::int64_t j, std::int64_t head_dim, long double theta,
                                const RopeScaling& s) {
  const long double f = plain_frequency(j, head_dim, theta);
  if (s.kind != RopeScalingKind::llama3)
    return f;
  const long double turns =
      static_cast<long double>(s.original_max_position_embeddings) * f / (2.0L * k_pi);
  const auto low = static_cast<long double>(s.low_freq_factor);
  const auto high = static_cast<long double>(s.high_freq_factor);
  const auto factor = static_cast<long double>(s.factor);
  if (turns >= high)
    return f;
  if (turns <= low)
    return f / factor;
  const long double share = (turns - low) / (high - low);
  return f * (share + (1.0L - share) / factor);
}

// Which branch frequency j falls in, by turns: 0 kept, 1 blended, 2 divided.
int band_of(std::int64_t j, const RopeScaling& s) {
  const long double turns = static_cast<long double>(s.original_max_position_embeddings) *
                            plain_frequency(j, k_head_dim, k_theta) / (2.0L * k_pi);
  if (turns > static_cast<long double>(s.high_freq_factor))
    return 0;
  return turns < static_cast<long double>(s.low_freq_factor) ? 2 : 1;
}

// One float ulp of `value`, relative: 2^-23 of it. Rounding a double to float errs by at most
// half of that; the double computation adds ~1e-16, so one ulp bounds both with room.
long double float_ulp(long double value) {
  return std::ldexp(std::abs(value), -23);
}

TEST(RopeScaling, Llama3TableMatchesALongDoubleReference) {
  const std::vector<float> scaled = rotary_inv_freq(k_head_dim, k_theta, k_llama31);
  const std::vector<float> plain = rotary_inv_freq(k_head_dim, k_theta);
  ASSERT_EQ(scaled.size(), 64u);
  ASSERT_EQ(plain.size(), 64u);
  int counts[3] = {0, 0, 0};
  for (std::int64_t j = 0; j < 64; ++j) {
    SCOPED_TRACE("j " + std::to_string(j));
    const auto i = static_cast<std::size_t>(j);
    const long double want = reference_frequency(j, k_head_dim, k_theta, k_llama31);
    EXPECT_LE(std::abs(static_cast<long double>(scaled[i]) - want), float_ulp(want));
    ++counts[band_of(j, k_llama31)];
  }
  // Wavelength 2 pi 500000^(j/64) against 8192 / 4 = 2048 and 8192 / 1 = 8192: j <= 28 turn
  // more than 4 times in 8192 positions (j = 28: wavelength 1956.5), j >= 35 less than once
  // (j = 35: 8218.7), and j = 29 ... 34 lie between.
  EXPECT_EQ(counts[0], 29);
  EXPECT_EQ(counts[1], 6);
  EXPECT_EQ(counts[2], 29);
  for (std::size_t j = 0; j <= 28; ++j)
    EXPECT_EQ(scaled[j], plain[j]) << "high frequency " << j << " is kept exactly";
  for (std::size_t j = 35; j < 64; ++j)
    EXPECT_EQ(scaled[j], plain[j] / 8.0f) << "low frequency " << j << " is divided by exactly 8";
  for (std::size_t j = 29; j <= 34; ++j) {
    EXPECT_LT(scaled[j], plain[j]) << j;
    EXPECT_GT(scaled[j], plain[j] / 8.0f) << j;
  }
  // By hand, j = 32 (mid-band): f = 500000^(-32/64) = 1 / sqrt(500000) = 1.4142135623730950e-3,
  // wavelength 2 pi sqrt(500000) = 4442.8829381583662, turns in 8192 positions
  // 8192 / 4442.88... = 1.8438478154897532, share (1.84384... - 1) / (4 - 1) = 0.28128260516325108,
  // scaled f = f (0.28128... + (1 - 0.28128...) / 8) = 5.2484616099295467e-4.
  const long double f32 = 1.0L / std::sqrt(500000.0L);
  const long double share = (8192.0L / (2.0L * k_pi * std::sqrt(500000.0L)) - 1.0L) / 3.0L;
  EXPECT_NEAR(static_cast<double>(share), 0.28128260516325108, 1e-16);
  const long double by_hand = 5.2484616099295467e-4L;
  EXPECT_NEAR(static_cast<double>(f32 * (share + (1.0L - share) / 8.0L)),
              static_cast<double>(by_hand), 1e-19);
  EXPECT_LE(std::abs(static_cast<long double>(scaled[32]) - by_hand), float_ulp(by_hand));
  // The first (highest) frequency is 1, the last 500000^(-63/64) / 8.
  EXPECT_EQ(scaled[0], 1.0f);
  EXPECT_LE(
      std::abs(static_cast<long double>(scaled[63]) - std::pow(500000.0L, -63.0L / 64.0L) / 8.0L),
      float_ulp(scaled[63]));
}

TEST(RopeScaling, NoScalingAndFactorOneLeaveTheTableUnscaled) {
  const std::vector<float> plain = rotary_inv_freq(k_head_dim, k_theta);
  RopeScaling unit = k_llama31;
  unit.factor = 1.0;
  EXPECT_EQ(rotary_inv_freq(k_head_dim, k_theta, unit), plain);
  EXPECT_EQ(rotary_inv_freq(k_head_dim, k_theta, RopeScaling{}), plain);
  for (std::int64_t j = 0; j < 64; ++j) {
    const long double want = plain_frequency(j, k_head_dim, k_theta);
    EXPECT_LE(std::abs(static_cast<long double>(plain[static_cast<std::size_t>(j)]) - want),
              float_ulp(want))
        << j;
  }
}

// x rotated at `position` by the reference frequencies, pair (j, j + 64) of each head in long
// double.
std::vector<long double> rotated_exactly(const std::vector<float>& x, std::int64_t heads,
                                         long double position, const RopeScaling& scaling) {
  std::vector<long double> out(x.begin(), x.end());
  const std::int64_t half = k_head_dim / 2;
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t j = 0; j < half; ++j) {
      const long double angle = position * reference_frequency(j, k_head_dim, k_theta, scaling);
      const auto a = static_cast<std::size_t>(h * k_head_dim + j);
      const auto b = static_cast<std::size_t>(h * k_head_dim + j + half);
      out[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
      out[b] = x[b] * std::cos(angle) + x[a] * std::sin(angle);
    }
  }
  return out;
}

TEST(RopeScaling, CpuRotationAtLargePositionsMatchesALongDoubleRotation) {
  const std::int64_t heads = 2;
  const std::vector<std::int32_t> positions = {20000, 131071};  // Llama 3.1's last position too
  const std::vector<float> table = rotary_inv_freq(k_head_dim, k_theta, k_llama31);
  const std::size_t width = static_cast<std::size_t>(heads * k_head_dim);
  std::vector<float> x(positions.size() * width);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1));
  std::vector<float> got = x;
  rotate_rows(got.data(), static_cast<std::int64_t>(positions.size()),
              static_cast<std::int64_t>(width), heads, k_head_dim, table, positions);
  RopeScaling none;
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const long double position = positions[r];
    SCOPED_TRACE("position " + std::to_string(positions[r]));
    const std::vector<float> row(x.begin() + static_cast<std::ptrdiff_t>(r * width),
                                 x.begin() + static_cast<std::ptrdiff_t>((r + 1) * width));
    const std::vector<long double> want = rotated_exactly(row, heads, position, k_llama31);
    const std::vector<long double> unscaled = rotated_exactly(row, heads, position, none);
    long double worst_unscaled_miss = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j < k_head_dim / 2; ++j) {
        // The float angle position * inv_freq[j] is off by up to two roundings (the table's and
        // the product's), 2^-23 of position * f in all, twice that for room; sinf and cosf and
        // the float rotation add a few 1e-8 of the pair's size.
        const long double f = reference_frequency(j, k_head_dim, k_theta, k_llama31);
        for (const std::int64_t c : {j, j + k_head_dim / 2}) {
          const auto i = static_cast<std::size_t>(h * k_head_dim + c);
          const auto a = static_cast<std::size_t>(h * k_head_dim + j);
          const long double size = std::abs(row[a]) + std::abs(row[a + k_head_dim / 2]);
          const long double tolerance = (position * f * std::ldexp(1.0L, -22) + 1e-6L) * size;
          EXPECT_LE(std::abs(got[r * width + i] - want[i]), tolerance)
              << "head " << h << " value " << c;
          if (band_of(j, k_llama31) == 2)
            worst_unscaled_miss =
                std::max(worst_unscaled_miss, std::abs(unscaled[i] - want[i]) / tolerance);
        }
      }
    }
    // Without the scaling the low frequencies land hundreds of tolerances away: the check above
    // tells the scaled table from the plain one.
    EXPECT_GT(worst_unscaled_miss, 1000.0L);
  }
}

// A small plain model (head_dim 8, theta 10000: wavelengths 6.3, 62.8, 628 and 6283) scaled with
// an original context of 64: frequency 0 is kept, 1 is blended, 2 and 3 are divided by 8.
ModelConfig scaled_small_config(double factor) {
  ModelConfig c = test_support::small_config(DepthStructure::plain(3));
  c.routers = false;
  c.rope_scaling = {.kind = RopeScalingKind::llama3,
                    .factor = factor,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 64};
  return c;
}

Matrix logits_of(const ModelConfig& config, const ModelWeights& weights,
                 const std::vector<std::int32_t>& tokens) {
  const CpuModel model(config, weights);
  const test_support::LayerCallRun run = test_support::run_layer_calls(model, tokens);
  return model.logits(*run.states, run.x.slots());
}

const std::vector<std::int32_t> k_tokens{3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 23, 8, 4, 6};

TEST(RopeScaling, ScaledModelChangesTheLogitsPastPositionZeroOnly) {
  const ModelConfig scaled = scaled_small_config(8.0);
  ModelConfig plain = scaled;
  plain.rope_scaling = {};
  const ModelWeights weights = test_support::small_weights(plain);
  const Matrix with = logits_of(scaled, weights, k_tokens);
  const Matrix without = logits_of(plain, weights, k_tokens);
  const float largest = without.cwiseAbs().maxCoeff();
  // Position 0 rotates by angle 0 whatever the frequencies, and attends only to itself.
  EXPECT_EQ(with.row(0), without.row(0));
  for (Eigen::Index t = 1; t < with.rows(); ++t) {
    EXPECT_GT((with.row(t) - without.row(t)).cwiseAbs().maxCoeff(), 1e-3f * largest)
        << "position " << t;
  }
  // A factor of 1 divides by 1 and blends f with f: the same model.
  EXPECT_EQ(logits_of(scaled_small_config(1.0), weights, k_tokens), without);
}

TEST(RopeScaling, ScaledModelMatchesTheReferenceForwardPass) {
  const ModelConfig config = scaled_small_config(8.0);
  const ModelWeights weights = test_support::small_weights(config);
  const Matrix got = logits_of(config, weights, k_tokens);
  const Matrix want = test_support::reference_forward(config, weights, k_tokens).logits;
  ASSERT_EQ(got.rows(), want.rows());
  // fp32 through three layers against the double reference (which scales with its own
  // formulation), as BackendSlots' bound.
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, want.cwiseAbs().maxCoeff()));
  // And the reference without the scaling is far from it: the agreement is the scaling's.
  ModelConfig plain = config;
  plain.rope_scaling = {};
  const Matrix unscaled = test_support::reference_forward(plain, weights, k_tokens).logits;
  EXPECT_GT((got - unscaled).cwiseAbs().maxCoeff(), 1e-2f * want.cwiseAbs().maxCoeff());
}

}  // namespace
}  // namespace exitsim::engine
