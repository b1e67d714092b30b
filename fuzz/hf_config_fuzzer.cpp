// Hugging Face config.json files read into the simulator's model shape (model.hf_config).
#include <cstdint>

#include "exitsim/core/hf_config.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  fuzz::expect_clean([&] { parse_hf_config(fuzz::as_text(data, size), "config.json"); });
  return 0;
}
