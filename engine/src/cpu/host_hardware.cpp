#include <fstream>
#include <string>

#include "exitsim/engine/cpu_model.hpp"
#include "exitsim/engine/cpu_threads.hpp"

namespace exitsim::engine {

std::string CpuModel::hardware() const {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size())
        model = line.substr(colon + 2);
      break;
    }
  }
  return model + " x " + cpu_threading_description();
}

}  // namespace exitsim::engine
