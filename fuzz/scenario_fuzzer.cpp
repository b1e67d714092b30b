// Scenario files: parsed, validated and resolved, or refused in one line.
#include <cstdint>

#include "exitsim/scenario/load.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  fuzz::expect_clean([&] { scenario::load_scenario_text(fuzz::as_text(data, size), "s.yaml"); });
  return 0;
}
