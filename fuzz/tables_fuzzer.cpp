// The measured tables a scenario names: the first byte picks the cost table, the exit table or
// the quality table; the rest is the file.
#include <cstdint>
#include <string>

#include "exitsim/policy/exit_table.hpp"
#include "exitsim/policy/quality_table.hpp"
#include "exitsim/sim/cost/table_cost_model.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  if (size == 0)
    return 0;
  const std::string path = fuzz::input_file("table.csv", data + 1, size - 1);
  fuzz::expect_clean([&] {
    switch (data[0] % 3) {
      case 0:
        sim::CostTable::read(path);
        break;
      case 1:
        policy::ExitTable::read(path, "state_copy");
        break;
      default:
        policy::QualityTable::read(path);
        break;
    }
  });
  return 0;
}
