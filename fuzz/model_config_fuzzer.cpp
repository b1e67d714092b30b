// exitsim.json model configurations.
#include <cstdint>

#include "exitsim/engine/model_config.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  fuzz::expect_clean(
      [&] { engine::parse_exitsim_config(fuzz::as_text(data, size), "exitsim.json", "."); });
  return 0;
}
