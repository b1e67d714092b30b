#pragma once

#include <memory>
#include <string>
#include <vector>

namespace exitsim::traces {

class CreatedDirectoryGuard;

// A run's output folder, written in a staging folder beside it (`<target>.exitsim-<pid>.tmp`) and
// moved into place by commit() when the run succeeds, so that a run that fails, is interrupted or
// is killed changes nothing in the target: never a mix of this run's files and an older run's.
//
// - The target did not exist: commit() renames the staging folder to it, all at once.
// - The target exists: commit() renames each output into it, replacing a file of the same name
//   and leaving every other file there alone (a user may point --out at a folder of their own).
// - Unless committed, the destructor removes the staging folder and the parents it made.
// - SIGINT, SIGTERM and SIGHUP remove the staging folder's files and the folder (and the parents
//   made, when empty). After a kill -9 the next run's output beside it removes the folder, as it
//   does the temporary files of dead runs, and says so.
class StagedOutputDirectory {
 public:
  // Makes the staging folder and any missing parent of it; throws InputError naming `target` and
  // `option` (the option or key that gave the folder) when it cannot, or when the target is a file.
  StagedOutputDirectory(std::string target, std::string option);
  ~StagedOutputDirectory();
  StagedOutputDirectory(const StagedOutputDirectory&) = delete;
  StagedOutputDirectory& operator=(const StagedOutputDirectory&) = delete;

  const std::string& target() const { return target_; }
  // Where the run writes its outputs until commit().
  const std::string& staging() const { return staging_; }
  // Moves the outputs into the target; throws InputError when a move fails.
  void commit();

 private:
  void remove_made_parents();

  std::string target_;
  std::string option_;
  std::string staging_;
  std::vector<std::string> made_parents_;  // deepest first
  std::vector<std::unique_ptr<CreatedDirectoryGuard>> parent_guards_;
  int signal_slot_ = -1;
  bool committed_ = false;
};

}  // namespace exitsim::traces
