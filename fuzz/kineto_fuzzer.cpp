// PyTorch-profiler (Kineto) traces: `calibrate --kineto` reads, maps and fits them or refuses
// them with a one-line InputError; nothing else escapes.
#include <array>
#include <cstdint>
#include <string>

#include "exitsim/analysis/calibrate.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::array<std::string, 1> paths = {fuzz::input_file("trace.json", data, size)};
  fuzz::expect_clean([&] { analysis::calibrate_kineto(paths, {}); });
  return 0;
}
