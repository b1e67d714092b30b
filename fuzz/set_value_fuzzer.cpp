// --set values: the first byte picks a key (sections, lists, scalars), the rest is its value.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/scenario/load.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  if (size == 0)
    return 0;
  static constexpr std::array<const char*, 10> k_keys = {
      "name",    "seed",  "scheduler",   "scheduler.max_running",  "workload.input_tokens",
      "cluster", "sweep", "exit_policy", "cost_model.price_scale", "workload.arrivals.cv"};
  const std::string key = k_keys[data[0] % k_keys.size()];
  const std::vector<std::string> set = {key + "=" + std::string(fuzz::as_text(data + 1, size - 1))};
  fuzz::expect_clean([&] { scenario::load_default_scenario(set); });
  return 0;
}
