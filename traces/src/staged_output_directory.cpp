#include "exitsim/traces/staged_output_directory.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "exitsim/core/error.hpp"
#include "exitsim/traces/atomic_output.hpp"

namespace exitsim::traces {
namespace {

namespace fs = std::filesystem;

InputError cannot(const std::string& target, const std::string& option, const std::string& found) {
  return InputError({target, 0, 0, option},
                    expected_found("a directory that can be created", found));
}

// Moves every entry of `from` into the existing folder `to`: files replace files of the same
// name, folders merge. Throws InputError naming the target on the first failure.
void move_entries(const fs::path& from, const fs::path& to, const std::string& target,
                  const std::string& option) {
  std::error_code ec;
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path destination = to / it->path().filename();
    std::error_code probe;
    if (it->is_directory(probe) && fs::is_directory(destination, probe)) {
      move_entries(it->path(), destination, target, option);
      continue;
    }
    std::error_code moving;
    fs::rename(it->path(), destination, moving);
    if (moving) {
      throw cannot(target, option,
                   fmt::format("{} cannot be moved to {}: {}", it->path().string(),
                               destination.string(), moving.message()));
    }
  }
  if (ec)
    throw cannot(target, option,
                 fmt::format("{} cannot be listed: {}", from.string(), ec.message()));
}

}  // namespace

StagedOutputDirectory::StagedOutputDirectory(std::string target, std::string option)
    : target_(std::move(target)),
      option_(std::move(option)),
      staging_(detail::AtomicOutputFile::temp_path_for(target_)) {
  std::error_code ec;
  if (fs::exists(target_, ec) && !fs::is_directory(target_, ec))
    throw cannot(target_, option_, "a file");
  // The parents about to be made for the staging folder, deepest first.
  const fs::path parent = fs::absolute(staging_, ec).parent_path();
  for (fs::path at = parent; !at.empty() && !fs::exists(at, ec) && at != at.parent_path();
       at = at.parent_path()) {
    made_parents_.push_back(at.string());
  }
  fs::create_directories(parent, ec);
  if (!ec)
    fs::create_directory(staging_, ec);
  if (ec) {
    remove_made_parents();
    throw cannot(target_, option_, ec.message());
  }
  for (const std::string& dir : made_parents_)
    parent_guards_.push_back(std::make_unique<CreatedDirectoryGuard>(dir));
  signal_slot_ = detail::register_staging_directory(staging_.c_str());
  remove_stale_temporaries(parent.string());
}

StagedOutputDirectory::~StagedOutputDirectory() {
  detail::unregister_staging_directory(signal_slot_);
  if (committed_)
    return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
  remove_made_parents();
}

void StagedOutputDirectory::commit() {
  if (committed_)
    return;
  std::error_code ec;
  if (!fs::exists(target_, ec)) {
    // The whole folder appears at once.
    fs::rename(staging_, target_, ec);
    if (ec) {
      throw cannot(target_, option_,
                   fmt::format("{} cannot be renamed to it: {}", staging_, ec.message()));
    }
  } else {
    move_entries(staging_, target_, target_, option_);
    fs::remove(staging_, ec);
  }
  committed_ = true;
  detail::unregister_staging_directory(signal_slot_);
  signal_slot_ = -1;
  for (const auto& guard : parent_guards_)
    guard->release();
}

void StagedOutputDirectory::remove_made_parents() {
  for (const std::string& dir : made_parents_) {
    std::error_code ignored;
    if (!fs::is_empty(dir, ignored) || ignored)
      break;
    fs::remove(dir, ignored);
  }
}

}  // namespace exitsim::traces
