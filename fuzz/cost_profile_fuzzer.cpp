// Calibrated cost profiles: read, written back and read again to the same profile.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "exitsim/sim/cost/cost_profile.hpp"
#include "fuzz_support.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("profile.json", data, size);
  bool read = false;
  sim::CostProfile profile;
  fuzz::expect_clean([&] {
    profile = sim::CostProfile::read(path);
    read = true;
  });
  if (!read)
    return 0;
  const std::string copy = path + ".copy.json";
  fuzz::expect_clean([&] { profile.write(copy); });
  const std::string written = slurp(copy);
  bool again = false;
  fuzz::expect_clean([&] {
    sim::CostProfile::read(copy).write(copy);
    again = true;
  });
  if (!again)
    fuzz::finding("a profile this exitsim wrote is refused when read back");
  if (slurp(copy) != written)
    fuzz::finding("a profile read back writes differently");
  return 0;
}
