#pragma once

// Scratch files and error capture shared by every test suite.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <concepts>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "exitsim/core/error.hpp"

namespace exitsim::test_support {

// What error_of() returns when the callable throws no InputError.
inline constexpr const char* k_no_error = "no error";

// A fresh, empty directory for one test's files, removed with its contents when destroyed. The
// name holds the test's name, the process id and a counter, so that parallel ctest processes,
// concurrent build trees and several directories in one test never share one.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::string name = "exitsim";
    if (const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info())
      name += std::string("_") + test->test_suite_name() + "_" + test->name();
    name += "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    for (char& c : name) {
      if (c == '/')
        c = '_';  // parameterized tests are named "Suite/Instance"
    }
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path `name` would have in this directory; nothing is created.
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Writes `content` byte for byte to `name` in this directory and returns the file's path.
  std::string write(const std::string& name, const std::string& content) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// Writes `content` byte for byte to `path`, replacing any file there.
inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// The whole content of `path`, byte for byte ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string file = path(name);
  write_file(file, content);
  return file;
}

// The what() of the InputError that calling `f` throws, or k_no_error when it throws none.
template <std::invocable F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const InputError& e) {
    return e.what();
  }
  return k_no_error;
}

// The folder of the public request traces: $EXITSIM_TRACES as users set it, else this project's
// ../shared/traces. It may be absent.
inline std::string shared_traces_dir() {
  const char* set = std::getenv("EXITSIM_TRACES");
  return set != nullptr && *set != '\0' ? std::string(set) : std::string(EXITSIM_SHARED_TRACES_DIR);
}

// The path of `name` among the public traces, which may be absent.
inline std::string shared_trace(const std::string& name) {
  return shared_traces_dir() + "/" + name;
}

// The folder of the public GPU measurements (Vidur's profiles under vidur/): $EXITSIM_GPU_DATA,
// else this project's ../shared/gpu. It may be absent.
inline std::string shared_gpu_dir() {
  const char* set = std::getenv("EXITSIM_GPU_DATA");
  return set != nullptr && *set != '\0' ? std::string(set) : std::string(EXITSIM_SHARED_GPU_DIR);
}

// The path of `name` (e.g. "vidur/a100_dgx_all_reduce.csv") among them, which may be absent.
inline std::string shared_gpu_file(const std::string& name) {
  return shared_gpu_dir() + "/" + name;
}

}  // namespace exitsim::test_support

// Skips the current test when `path` does not exist: the public traces are optional.
#define EXITSIM_SKIP_UNLESS_EXISTS(path)      \
  do {                                        \
    if (!std::filesystem::exists(path))       \
      GTEST_SKIP() << (path) << " is absent"; \
  } while (false)
