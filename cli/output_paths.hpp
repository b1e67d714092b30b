#pragma once

// Output folders and files checked before the work, so that a path in the way fails at once and
// leaves nothing behind.

#include <string>

namespace exitsim::cli {

// Refuses, before any work, an output folder that cannot be made: one of its existing ancestors
// (or the path itself) is not a directory. `option` names it ("--out").
void check_output_directory(const std::string& path, const std::string& option);
// For an output file: its folder can be created (checked before the work, as above), and is
// (made when the file is written, so a run that fails first leaves no folder behind).
void check_output_file_folder(const std::string& path, const std::string& option);
void make_output_file_folder(const std::string& path);

}  // namespace exitsim::cli
