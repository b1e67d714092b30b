#include "output_paths.hpp"

#include <filesystem>

#include "exitsim/core/error.hpp"

namespace exitsim::cli {

void check_output_directory(const std::string& path, const std::string& option) {
  std::error_code ec;
  for (std::filesystem::path at = std::filesystem::absolute(path, ec); !at.empty();
       at = at.parent_path()) {
    if (std::filesystem::exists(at, ec)) {
      if (!std::filesystem::is_directory(at, ec)) {
        throw InputError({path, 0, 0, option},
                         expected_found("a directory that can be created",
                                        at.string() + " is a file, not a directory"));
      }
      return;
    }
    if (at == at.parent_path())
      return;
  }
}

void check_output_file_folder(const std::string& path, const std::string& option) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty())
    check_output_directory(folder.string(), option);
}

void make_output_file_folder(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty())
    std::filesystem::create_directories(folder);
}

}  // namespace exitsim::cli
