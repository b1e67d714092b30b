// What every harness asserts of a reader given arbitrary bytes: it returns, or it throws the
// user-error type with a message fit for a console (one line, no control bytes, bounded); any
// other exception, or a round trip that changes what was read, is a finding (abort).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "exitsim/core/error.hpp"

namespace exitsim::fuzz {

// Messages are cut to about 1 KiB (core/error.cpp); anything longer escaped the cut.
inline constexpr std::size_t k_max_message_bytes = 1100;

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "exitsim fuzz finding: %s\n", what.c_str());
  std::abort();
}

inline void check_message(const InputError& error) {
  const std::string_view what = error.what();
  if (what.empty())
    finding("an empty error message");
  if (what.size() > k_max_message_bytes)
    finding("a message of " + std::to_string(what.size()) + " bytes");
  for (const char c : what) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      finding("a control byte in the message: " + std::string(what.substr(0, 200)));
  }
}

// Runs `read`; an InputError is the expected refusal, anything else a finding.
template <typename Read>
void expect_clean(Read&& read) {
  try {
    read();
  } catch (const InputError& error) {
    check_message(error);
  } catch (const std::exception& other) {
    finding(std::string("an exception other than InputError: ") + other.what());
  } catch (...) {
    finding("a non-standard exception");
  }
}

// The readers take paths: each process writes its inputs to a folder of its own.
inline std::string input_file(std::string_view name, const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("exitsim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::filesystem::path path = dir / std::string(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace exitsim::fuzz
