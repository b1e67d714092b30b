// Serving-benchmark results (vLLM's JSON, SGLang's JSON Lines, GuideLLM's report, AIPerf's records
// and summary; detailed or summary-only) as `validate --against` reads them: every run.
#include <cstdint>
#include <string>

#include "exitsim/traces/serving_benchmark.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("result.json", data, size);
  fuzz::expect_clean([&] { (void)traces::read_serving_benchmark_runs(path); });
  return 0;
}
