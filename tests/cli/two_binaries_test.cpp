// `exitsim` links neither the GPU libraries nor MPI, and hands the commands that need them to
// exitsim-full beside it (docs/cli.md, "Two binaries").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "support/cli_fixture.hpp"

namespace cli_support {
namespace {

std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    return out;
  char buffer[4096];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe))
    out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

TEST_F(Cli, TheLeanBinaryLinksNoGpuLibraryAndNoMpi) {
  const std::string libraries = output_of("ldd '" + std::string(EXITSIM_CLI_PATH) + "' 2>&1");
  ASSERT_NE(libraries.find("libc.so"), std::string::npos) << libraries;
  for (const char* heavy : {"libcudart", "libcublas", "libcupti", "libcuda.", "libmpi"})
    EXPECT_EQ(libraries.find(heavy), std::string::npos) << heavy << " in\n" << libraries;
}

// Alone in a folder (no exitsim-full beside it), the lean binary refuses what needs the full one
// in one line naming it, both for the GPU backend and for a launch by mpirun.
TEST_F(Cli, WithoutItsCompanionTheLeanBinarySaysWhatIsMissing) {
  const fs::path alone = dir_ / "exitsim";
  fs::copy_file(EXITSIM_CLI_PATH, alone);
  const fs::path err = dir_ / "err.txt";
  const auto run_alone = [&](const std::string& prefix, const std::string& args) {
    const int status = std::system(
        (prefix + "'" + alone.string() + "' " + args + " 2>'" + err.string() + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run_alone("", "engine run --model m --backend cuda"), 1);
  const std::string gpu = slurp(err);
  EXPECT_NE(gpu.find("exitsim: error: --backend cuda (the GPU libraries): expected exitsim-full "
                     "beside this exitsim"),
            std::string::npos)
      << gpu;
  EXPECT_EQ(std::count(gpu.begin(), gpu.end(), '\n'), 1) << gpu;
  EXPECT_EQ(run_alone("OMPI_COMM_WORLD_SIZE=2 ", "sweep s.yaml --db d.db"), 1);
  EXPECT_NE(slurp(err).find("a run under mpirun (MPI): expected exitsim-full"), std::string::npos)
      << slurp(err);
  // Everything else runs in the lean binary alone.
  EXPECT_EQ(run_alone("", "--version"), 0);
}

// With exitsim-full built, --backend cuda reaches the GPU backend: without a GPU its own error,
// naming the device, not the lean binary's "built without the CUDA toolkit".
TEST_F(Cli, TheGpuBackendRunsInTheFullBinary) {
  const fs::path full = fs::path(EXITSIM_CLI_PATH).parent_path() / "exitsim-full";
  if (!fs::exists(full))
    GTEST_SKIP() << "no exitsim-full: this build has neither the CUDA toolkit nor MPI";
  const Result r =
      run("engine run --model models/tiny-recursive --text "
          "models/tiny-recursive/held_out.txt --backend cuda --set workload.requests=1"
          " --set 'workload.input_tokens={dist: fixed, value: 8}'"
          " --set 'workload.output_tokens={dist: fixed, value: 2}' -o '" +
          (dir_ / "out").string() + "'");
  if (r.exit_code == 0)
    return;  // a GPU is there: it ran
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.find("built without the CUDA toolkit"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("expected exitsim-full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cli_support
