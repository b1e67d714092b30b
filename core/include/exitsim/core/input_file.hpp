#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>

namespace exitsim {

// Opens `path` for binary reading. Throws InputError naming the file: "cannot open the <what>:
// <reason>" (a directory is refused up front: on Linux it opens as a stream and fails only when
// read, with a vaguer message).
std::ifstream open_input_file(const std::string& path, std::string_view what);

// The whole file at `path`, opened as open_input_file does, read in chunks up to `limit_bytes`:
// /dev/zero or a mistaken disk image is refused after limit_bytes + 1 bytes instead of read
// until memory runs out. Throws InputError naming the file: "cannot read the <what>: <reason>",
// or "expected a <what> of at most <limit> (1 GiB, 16 MiB, ...), found a larger file".
std::string read_bounded_file(const std::string& path, std::string_view what,
                              std::size_t limit_bytes);

}  // namespace exitsim
