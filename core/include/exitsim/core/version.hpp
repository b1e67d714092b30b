#pragma once

#include <string>
#include <string_view>

namespace exitsim {

// The release (PROJECT_VERSION) and the commit this binary was built from: `git describe
// --always --dirty` at build time ("-dirty": built with uncommitted changes; "unknown": built
// outside a git checkout). Results record both, so a number can be traced to the code that made it.
std::string_view version();
std::string_view commit();

// "0.1.0 (commit 1a2b3c4d5e6f)".
inline std::string version_line() {
  return std::string(version()) + " (commit " + std::string(commit()) + ")";
}

}  // namespace exitsim
