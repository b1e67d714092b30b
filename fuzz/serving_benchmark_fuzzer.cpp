// Serving-benchmark results (vLLM's JSON, SGLang's JSON Lines) as `validate --against` reads them.
#include <cstdint>
#include <string>

#include "exitsim/traces/serving_benchmark.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("result.json", data, size);
  fuzz::expect_clean([&] { (void)traces::read_serving_benchmark(path); });
  return 0;
}
