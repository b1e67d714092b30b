// Token (exit) traces, read to the end.
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "exitsim/traces/token_trace.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  fuzz::expect_clean([&] {
    traces::TokenTraceReader reader(
        std::make_unique<std::istringstream>(std::string(fuzz::as_text(data, size))), "tokens.csv");
    while (reader.next()) {
    }
  });
  return 0;
}
