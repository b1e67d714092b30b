#pragma once

// A byte-level BPE vocabulary for tests that write their own tokenizer.json: GPT-2's byte
// alphabet spelled out here, independently of the library (the printable Latin-1 bytes stand
// for themselves, the other 68 take U+0100.. in byte order), each byte's symbol with the byte's
// own value as id.

#include <nlohmann/json.hpp>
#include <string>

namespace exitsim::test_support {

inline nlohmann::json byte_level_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  unsigned stand_in = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const unsigned code_point = printable ? b : stand_in++;
    // Code points below U+0800 take two UTF-8 bytes at most.
    std::string utf8;
    if (code_point < 0x80) {
      utf8.push_back(static_cast<char>(code_point));
    } else {
      utf8.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
    vocab[utf8] = b;
  }
  return vocab;
}

// A tokenizer.json with GPT-2's ByteLevel pre-tokenizer, the byte vocabulary and `merges`
// ("left right", in rank order), each merged token given the next id from 256 up.
inline std::string byte_level_tokenizer_json(const std::vector<std::string>& merges) {
  nlohmann::json vocab = byte_level_vocab();
  for (const std::string& merge : merges) {
    const std::size_t space = merge.find(' ');
    vocab[merge.substr(0, space) + merge.substr(space + 1)] = vocab.size();
  }
  return nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}
      .dump();
}

}  // namespace exitsim::test_support
