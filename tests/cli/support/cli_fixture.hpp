// The `exitsim` binary run as a user runs it, from the repository root, in a fresh folder per
// test: its exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cli_support {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("exitsim_cli_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path file(const std::string& name, const std::string& content) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // A random tiny model (seed 3) and a text of `sentence` repeated `times`: the engine options
  // "--model M --text T" that run it.
  std::string random_model_and_text(const std::string& sentence, int times) const {
    const fs::path model = dir_ / "model";
    EXPECT_EQ(run("engine random-model -o '" + model.string() + "' --seed 3").exit_code, 0);
    std::string text;
    for (int i = 0; i < times; ++i)
      text += sentence;
    return "--model '" + model.string() + "' --text '" + file("corpus.txt", text).string() + "'";
  }

  // Runs the CLI from the repository root (scenario examples use paths relative to it).
  Result run(const std::string& args) const {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    const std::string command = "cd '" + std::string(EXITSIM_SOURCE_DIR) + "' && '" +
                                std::string(EXITSIM_CLI_PATH) + "' " + args + " >'" + out.string() +
                                "' 2>'" + err.string() + "'";
    const int status = std::system(command.c_str());
    Result result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(out);
    result.err = slurp(err);
    return result;
  }

  fs::path dir_;
};

}  // namespace cli_support
