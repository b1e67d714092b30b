// Handing a command to exitsim-full: found beside this executable, run by execv so that it keeps
// this process (its PID under mpirun, its environment and standard streams).
#include "full_binary.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "exitsim/analysis/sweep.hpp"

namespace exitsim::cli {

bool needs_full_binary(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--backend=cuda" ||
        (arg == "--backend" && i + 1 < argc && std::string_view(argv[i + 1]) == "cuda"))
      return true;
  }
  return analysis::launched_by_mpi();
}

int run_in_full_binary(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path full = self.parent_path() / "exitsim-full";
  const char* why = analysis::launched_by_mpi() ? "a run under mpirun (MPI)"
                                                : "--backend cuda (the GPU libraries)";
  if (error || !std::filesystem::exists(full)) {
    fmt::print(stderr,
               "exitsim: error: {}: expected exitsim-full beside this exitsim ({}), found none: "
               "build it with the CUDA toolkit or MPI present (cmake --build --preset release)\n",
               why, full.string());
    return 1;
  }
  const std::string path = full.string();
  ::execv(path.c_str(), argv);
  fmt::print(stderr, "exitsim: error: {}: cannot run {}: {}\n", why, path, std::strerror(errno));
  return 1;
}

}  // namespace exitsim::cli
