#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

// IEEE binary16 and bfloat16 <-> binary32, written out bit by bit so that the results do not
// depend on compiler support for _Float16 or on the FPU's rounding mode. Narrowing rounds to
// nearest, ties to even, as PyTorch does; NaN stays NaN (quiet) and keeps its sign.
namespace exitsim::engine::detail {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24 is exact in binary32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  std::uint32_t half = 0;
  if (magnitude > 0x7f800000u) {
    // Keep the payload's top bits and force the quiet bit so the result cannot become infinity.
    half = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  } else if (magnitude >= 0x477ff000u) {
    // 65520 and above: halfway past the largest half (65504) rounds to even, which is infinity.
    half = 0x7c00u;
  } else if (magnitude >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round away 13 mantissa bits; a carry out
    // of the mantissa correctly bumps the exponent.
    half = (magnitude >> 13) - (112u << 10);
    const std::uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0))
      ++half;
  } else if ((magnitude >> 23) != 0) {
    // Subnormal half (units of 2^-24). Binary32 subnormals are far below half of 2^-24 and fall
    // to the final zero branch instead.
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t shift = 126 - exponent;
    if (shift <= 24) {
      const std::uint32_t full = (magnitude & 0x7fffffu) | 0x800000u;
      half = full >> shift;
      const std::uint32_t rest = full & ((1u << shift) - 1);
      const std::uint32_t halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (half & 1u) != 0))
        ++half;
    }
  }
  return static_cast<std::uint16_t>(sign | half);
}

inline float bfloat16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; overflow of the largest
  // finite values lands on infinity, which is the correctly rounded result.
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

}  // namespace exitsim::engine::detail
