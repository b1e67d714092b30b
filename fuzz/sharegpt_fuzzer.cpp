// ShareGPT conversation files, their turns counted with a fixed byte-level tokenizer (the
// corpus's tokenizer.json is not fuzzed here: tokenizer_fuzzer does that).
#include <cstdint>
#include <string>

#include "exitsim/traces/request_trace.hpp"
#include "fuzz_support.hpp"

namespace {

// GPT-2's byte alphabet as a vocabulary (ids = byte values) and one merge, "h i".
std::string tokenizer_json() {
  std::string vocab;
  unsigned stand_in = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    char symbol[16];
    std::snprintf(symbol, sizeof symbol, "\\u%04X", printable ? b : stand_in++);
    vocab += "\"" + std::string(symbol) + "\": " + std::to_string(b) + ", ";
  }
  return R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"("hi": 256}, "merges": ["h i"]},
             "pre_tokenizer": {"type": "ByteLevel"}})";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  static const std::string tokenizer = [] {
    const std::string text = tokenizer_json();
    return fuzz::input_file("tokenizer.json", reinterpret_cast<const std::uint8_t*>(text.data()),
                            text.size());
  }();
  const std::string path = fuzz::input_file("sharegpt.json", data, size);
  traces::RequestTraceOptions options;
  options.format = traces::RequestTraceFormat::sharegpt;
  options.tokenizer = tokenizer;
  for (const bool skip_bad_rows : {false, true}) {
    options.skip_bad_rows = skip_bad_rows;
    fuzz::expect_clean([&] {
      const auto source = traces::open_request_trace(path, options);
      while (const auto request = source->next()) {
        if (request->input_tokens < 1 || request->output_tokens < 1)
          fuzz::finding("a request without tokens");
      }
      (void)source->notes();
    });
  }
  return 0;
}
