// safetensors files: the header validated, then every tensor read as floats.
#include <cstdint>
#include <string>

#include "exitsim/engine/safetensors.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exitsim;
  const std::string path = fuzz::input_file("model.safetensors", data, size);
  fuzz::expect_clean([&] {
    engine::SafetensorsFile file = engine::SafetensorsFile::open(path);
    for (const std::string& name : file.names())
      file.read_floats(name);
  });
  return 0;
}
