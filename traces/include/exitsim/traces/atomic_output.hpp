#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "exitsim/core/error.hpp"

// Public so that other parts (the simulator's per-request CSV) share one all-or-nothing writer
// instead of growing their own; it stays in `detail` because it is plumbing, not a trace format.
namespace exitsim::traces::detail {

// Writes to `<path>.exitsim-<pid>.tmp` beside it and renames it to `path` in finish(), so that a
// run that fails midway never leaves a truncated file that a later step would read as complete.
// Crash safety: SIGINT, SIGTERM and SIGHUP remove every temporary file still open before the
// process ends as the signal would have ended it; a file left by a run killed outright (kill -9)
// carries its pid, and the next output into that folder removes it once that process is gone,
// and says so.
class AtomicOutputFile {
 public:
  // The I/O step that failed, for the error hook.
  enum class Step : std::uint8_t { create, write, rename };
  // Makes the InputError for a failed step. `reason` is the system's report: errno for create
  // and write (possibly 0 when the stream set none), the file system's error for rename.
  using ErrorHook = InputError (*)(const AtomicOutputFile& file, Step step, std::error_code reason);

  // The default hook: "<path>: cannot create <temp>: <reason>", "<path>: cannot write
  // <temp>", "<path>: cannot rename <temp>: <reason>".
  static InputError default_error(const AtomicOutputFile& file, Step step, std::error_code reason);

  // Throws the hook's InputError when the temporary file cannot be created.
  explicit AtomicOutputFile(std::string path, ErrorHook on_error = default_error);
  // Removes the temporary file unless finish() succeeded.
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  // Throws std::logic_error after finish().
  void write(std::string_view bytes);
  // Flushes, closes and renames; throws the hook's InputError on any I/O failure.
  void finish();
  bool finished() const { return finished_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The temporary file this process writes for `path`.
  static std::string temp_path_for(const std::string& path);

 private:
  std::string path_;
  std::string temp_path_;
  int signal_slot_ = -1;  // where the signal handler finds temp_path_; -1: not registered
  ErrorHook on_error_;
  std::ofstream out_;
  bool finished_ = false;
};

// Staging folders (StagedOutputDirectory) the signal handler empties and removes; -1: no slot
// was free (the next run's stale sweep still finds the folder).
int register_staging_directory(const char* path);
void unregister_staging_directory(int slot);

}  // namespace exitsim::traces::detail

namespace exitsim::traces {

// Writes `content` to `path` all at once through AtomicOutputFile: either the whole file appears
// or, on an InputError, nothing does.
void write_file_atomically(const std::string& path, std::string_view content);

// A folder this run created for its outputs: while held, SIGINT, SIGTERM and SIGHUP remove it if
// it is empty (after removing the temporary files in it). Release once the run keeps its outputs.
class CreatedDirectoryGuard {
 public:
  explicit CreatedDirectoryGuard(std::string path);
  ~CreatedDirectoryGuard();
  CreatedDirectoryGuard(const CreatedDirectoryGuard&) = delete;
  CreatedDirectoryGuard& operator=(const CreatedDirectoryGuard&) = delete;
  void release();

 private:
  std::string path_;
  int slot_ = -1;
};

// Removes the temporary files and staging folders of exitsim runs that are no longer running
// from `dir`; returns their paths (each is also named on stderr as a note). Called by every
// AtomicOutputFile and StagedOutputDirectory.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

}  // namespace exitsim::traces
