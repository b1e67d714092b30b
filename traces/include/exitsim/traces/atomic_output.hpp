#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "exitsim/core/error.hpp"

// Public so that other parts (the simulator's per-request CSV) share one all-or-nothing writer
// instead of growing their own; it stays in `detail` because it is plumbing, not a trace format.
namespace exitsim::traces::detail {

// Writes to `<path>.tmp` and renames it to `path` in finish(), so that a run that fails midway
// never leaves a truncated file that a later step would read as complete.
class AtomicOutputFile {
 public:
  // The I/O step that failed, for the error hook.
  enum class Step : std::uint8_t { create, write, rename };
  // Makes the InputError for a failed step. `reason` is the system's report: errno for create
  // and write (possibly 0 when the stream set none), the file system's error for rename.
  using ErrorHook = InputError (*)(const AtomicOutputFile& file, Step step, std::error_code reason);

  // The default hook: "<path>: cannot create <path>.tmp: <reason>", "<path>: cannot write
  // <path>.tmp", "<path>: cannot rename <path>.tmp: <reason>".
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

 private:
  std::string path_;
  std::string temp_path_;
  ErrorHook on_error_;
  std::ofstream out_;
  bool finished_ = false;
};

}  // namespace exitsim::traces::detail

namespace exitsim::traces {

// Writes `content` to `path` all at once through AtomicOutputFile: either the whole file appears
// or, on an InputError, nothing does.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace exitsim::traces
