#pragma once
// The pixels of an 8-bit RGB or RGBA PNG (what headless Chromium's --screenshot writes), for
// tests that look at a rendered report.

#include <cstdint>
#include <string>
#include <vector>

namespace exitsim::test_support {

struct Image {
  std::size_t width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // width x height x 3, row by row
  std::size_t count(std::uint8_t r, std::uint8_t g, std::uint8_t b) const;
};

// Throws std::runtime_error for anything else (other bit depths, palettes, interlacing).
Image read_png(const std::string& path);

}  // namespace exitsim::test_support
