#include "exitsim/core/input_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "exitsim/core/error.hpp"

namespace exitsim {

std::ifstream open_input_file(const std::string& path, std::string_view what) {
  const auto fail = [&](const std::string& reason) {
    throw InputError(SourceLocation{path, 0, 0, ""},
                     fmt::format("cannot open the {}: {}", what, reason));
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(std::strerror(EISDIR));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    const int err = errno;
    fail(err != 0 ? std::strerror(err) : "the file could not be opened");
  }
  return in;
}

}  // namespace exitsim
