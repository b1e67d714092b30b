#include "byte_alphabet.hpp"

#include <cstdint>

namespace exitsim::text {
namespace {

bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct Alphabet {
  std::array<char32_t, 256> symbols{};
  std::array<std::string, 256> utf8{};
  Alphabet() {
    char32_t next_stand_in = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      symbols[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next_stand_in++;
      append_utf8(utf8[b], symbols[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

char32_t byte_symbol(unsigned char b) {
  return alphabet().symbols[b];
}

const std::string& byte_symbol_utf8(unsigned char b) {
  return alphabet().utf8[b];
}

std::optional<unsigned char> symbol_byte(char32_t symbol) {
  if (symbol < 0x100)
    return stands_for_itself(symbol) ? std::optional(static_cast<unsigned char>(symbol))
                                     : std::nullopt;
  // The stand-ins are U+0100 upwards in byte order over the bytes that do not stand for
  // themselves; there are 68 of them.
  std::uint32_t index = symbol - 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    if (stands_for_itself(b))
      continue;
    if (index == 0)
      return static_cast<unsigned char>(b);
    --index;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t code_point) {
  const auto byte = [&](std::uint32_t value) { out.push_back(static_cast<char>(value)); };
  const std::uint32_t c = code_point;
  if (c < 0x80) {
    byte(c);
  } else if (c < 0x800) {
    byte(0xC0 | (c >> 6));
    byte(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    byte(0xE0 | (c >> 12));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  } else {
    byte(0xF0 | (c >> 18));
    byte(0x80 | ((c >> 12) & 0x3F));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  }
}

std::optional<std::u32string> decode_utf8(std::string_view text) {
  std::u32string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80           ? 1
                               : (lead >> 5) == 0x6  ? 2
                               : (lead >> 4) == 0xE  ? 3
                               : (lead >> 3) == 0x1E ? 4
                                                     : 0;
    if (length == 0 || i + length > text.size())
      return std::nullopt;
    std::uint32_t c = length == 1 ? lead : lead & (0x7Fu >> length);
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80)
        return std::nullopt;
      c = (c << 6) | (next & 0x3Fu);
    }
    out.push_back(static_cast<char32_t>(c));
    i += length;
  }
  return out;
}

}  // namespace exitsim::text
