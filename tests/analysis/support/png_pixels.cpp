#include "png_pixels.hpp"

#include <zlib.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace exitsim::test_support {

namespace {

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t k = 0; k < 4; ++k)
    v = (v << 8U) | static_cast<std::uint32_t>(static_cast<std::uint8_t>(s[at + k]));
  return v;
}

int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

}  // namespace

std::size_t Image::count(std::uint8_t r, std::uint8_t g, std::uint8_t b) const {
  std::size_t n = 0;
  for (std::size_t k = 0; k + 2 < rgb.size(); k += 3)
    n += rgb[k] == r && rgb[k + 1] == g && rgb[k + 2] == b ? 1U : 0U;
  return n;
}

Image read_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (file.size() < 8 || file.compare(1, 3, "PNG") != 0)
    throw std::runtime_error(path + ": not a PNG");
  Image image;
  std::size_t channels = 0;
  std::string compressed;
  for (std::size_t at = 8; at + 8 <= file.size();) {
    const std::uint32_t length = big_endian(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (type == "IHDR") {
      image.width = big_endian(file, at + 8);
      image.height = big_endian(file, at + 12);
      const int depth = static_cast<std::uint8_t>(file[at + 16]);
      const int colour = static_cast<std::uint8_t>(file[at + 17]);
      const int interlace = static_cast<std::uint8_t>(file[at + 20]);
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0)
        throw std::runtime_error(path + ": not an 8-bit RGB(A) non-interlaced PNG");
      channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      compressed += file.substr(at + 8, length);
    }
    at += 12 + length;
  }
  const std::size_t stride = image.width * channels;
  std::vector<std::uint8_t> raw(image.height * (stride + 1));
  uLongf size = raw.size();
  if (channels == 0 ||
      uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(compressed.data()),
                 compressed.size()) != Z_OK ||
      size != raw.size())
    throw std::runtime_error(path + ": bad image data");
  std::vector<std::uint8_t> previous(stride, 0), row(stride);
  image.rgb.reserve(image.width * image.height * 3);
  for (std::size_t y = 0; y < image.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* line = &raw[y * (stride + 1) + 1];
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= channels ? row[x - channels] : 0;
      const int b = previous[x];
      const int c = x >= channels ? previous[x - channels] : 0;
      const std::array<int, 5> predictor = {0, a, b, (a + b) / 2, paeth(a, b, c)};
      if (filter > 4)
        throw std::runtime_error(path + ": bad filter");
      row[x] = static_cast<std::uint8_t>(line[x] + predictor[filter]);
    }
    for (std::size_t x = 0; x < image.width; ++x) {
      for (std::size_t k = 0; k < 3; ++k)
        image.rgb.push_back(row[x * channels + k]);
    }
    previous = row;
  }
  return image;
}

}  // namespace exitsim::test_support
