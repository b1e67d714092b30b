#include "exitsim/core/input_file.hpp"

#include <fmt/format.h>

#include <array>
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

namespace {

// "1 GiB", "16 MiB", "4096 bytes": the limit as people write it.
std::string size_text(std::size_t bytes) {
  constexpr std::size_t k_mib = std::size_t{1} << 20;
  constexpr std::size_t k_gib = std::size_t{1} << 30;
  if (bytes >= k_gib && bytes % k_gib == 0)
    return fmt::format("{} GiB", bytes / k_gib);
  if (bytes >= k_mib && bytes % k_mib == 0)
    return fmt::format("{} MiB", bytes / k_mib);
  return fmt::format("{} bytes", bytes);
}

}  // namespace

std::string read_bounded_file(const std::string& path, std::string_view what,
                              std::size_t limit_bytes) {
  std::ifstream in = open_input_file(path, what);
  std::string text;
  std::array<char, 1 << 16> chunk{};
  while (text.size() <= limit_bytes && in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) {
    throw InputError(SourceLocation{path, 0, 0, ""},
                     fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
  }
  if (text.size() > limit_bytes) {
    throw InputError(SourceLocation{path, 0, 0, ""},
                     expected_found(fmt::format("a {} of at most {}", what, size_text(limit_bytes)),
                                    "a larger file"));
  }
  return text;
}

}  // namespace exitsim
