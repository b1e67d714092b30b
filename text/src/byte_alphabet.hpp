#pragma once

// GPT-2's byte alphabet: byte-level BPE vocabularies spell every byte as one printable code
// point, so that tokens are readable strings without spaces or control characters.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace exitsim::text {

// The code point standing for byte `b`: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves; the other 68 take U+0100, U+0101, ... in increasing byte order (so the
// space 0x20, the 33rd of them, is U+0120 'Ġ').
char32_t byte_symbol(unsigned char b);
// The same as UTF-8, e.g. "Ġ" for ' '.
const std::string& byte_symbol_utf8(unsigned char b);
// The byte a symbol stands for; nullopt for a code point outside the alphabet.
std::optional<unsigned char> symbol_byte(char32_t symbol);

// Appends `code_point` as UTF-8.
void append_utf8(std::string& out, char32_t code_point);
// Decodes valid UTF-8 (tokens read from JSON are); nullopt for anything else.
std::optional<std::u32string> decode_utf8(std::string_view text);

}  // namespace exitsim::text
