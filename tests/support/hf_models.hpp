#pragma once

// Real Hugging Face configs from ../shared/models/hf (never copied into the repository): a test
// that reads one skips, naming the path, when it is absent.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace exitsim::test_support {

// The config.json of `model` (its folder under ../shared/models/hf), or nullopt when absent.
inline std::optional<std::string> shared_hf_config_path(const std::string& model) {
  const std::string path = std::string(EXITSIM_SHARED_MODELS_DIR) + "/" + model + "/config.json";
  if (!std::filesystem::is_regular_file(path))
    return std::nullopt;
  return path;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace exitsim::test_support

// Skips the test when ../shared/models/hf/<model> is absent; else PATH names its config.json.
#define EXITSIM_SHARED_HF_CONFIG_OR_SKIP(path, model)                                       \
  const std::optional<std::string> path##_found =                                           \
      exitsim::test_support::shared_hf_config_path(model);                                  \
  if (!path##_found)                                                                        \
    GTEST_SKIP() << "no " << EXITSIM_SHARED_MODELS_DIR << "/" << (model) << "/config.json"; \
  const std::string& path = *path##_found
