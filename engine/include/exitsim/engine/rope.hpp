#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

// Rotary position embedding frequencies, shared by the CPU backend (rotate_rows) and the GPU
// backend (which uploads the same table once for its rotary kernel), so both rotate by the same
// angles whatever the scaling.
namespace exitsim::engine {

enum class RopeScalingKind : std::uint8_t { none, llama3 };

// A checkpoint's frequency scaling (Hugging Face config.json "rope_scaling"). Only Llama 3.1's
// "llama3" scaling is run: frequencies whose wavelength is shorter than
// original_max_position_embeddings / high_freq_factor are kept, those longer than
// original_max_position_embeddings / low_freq_factor are divided by `factor`, and the band in
// between is interpolated smoothly. With kind none the other fields are unused.
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1.0;                                   // >= 1
  double low_freq_factor = 1.0;                          // > 0
  double high_freq_factor = 4.0;                         // > low_freq_factor
  std::int64_t original_max_position_embeddings = 8192;  // >= 1

  friend bool operator==(const RopeScaling&, const RopeScaling&) = default;
};

// "none" or "llama3" (the config.json spelling).
std::string_view to_string(RopeScalingKind kind);

// The head_dim / 2 rotary inverse frequencies: theta^(-2j / head_dim) for j < head_dim / 2,
// computed in double, scaled as `scaling` says (also in double), then rounded to float. Value j
// of a head rotates with value j + head_dim / 2 at angle position * inv_freq[j].
std::vector<float> rotary_inv_freq(std::int64_t head_dim, double theta,
                                   const RopeScaling& scaling = {});

}  // namespace exitsim::engine
