// Hugging Face tokenizer.json files: read, then a fixed set of texts encoded with the template.
// Encoding is checked for ids within the tokenizer's range, and for the same ids twice.
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/text/bpe_tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("tokenizer.json", data, size);
  fuzz::expect_clean([&] {
    const text::BpeTokenizer tokenizer = text::BpeTokenizer::from_file(path);
    for (const std::string text : {"", "hello world", "  a\tb\r\n\n", "h\u00E9llo \U0001F600!",
                                   "12345 don't <|endoftext|>", "\xFF\xFE\xC3"}) {
      const std::vector<std::int32_t> ids = tokenizer.encode_with_template(text);
      for (const std::int32_t id : ids) {
        if (id < 0 || id >= tokenizer.id_limit())
          fuzz::finding("an id outside the tokenizer's range");
      }
      if (tokenizer.encode_with_template(text) != ids)
        fuzz::finding("two encodings of one text differ");
      (void)tokenizer.decode(ids);
    }
  });
  return 0;
}
