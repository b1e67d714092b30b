#pragma once

#include <fstream>
#include <string>
#include <string_view>

namespace exitsim {

// Opens `path` for binary reading. Throws InputError naming the file: "cannot open the <what>:
// <reason>" (a directory is refused up front: on Linux it opens as a stream and fails only when
// read, with a vaguer message).
std::ifstream open_input_file(const std::string& path, std::string_view what);

}  // namespace exitsim
