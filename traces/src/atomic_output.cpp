#include "exitsim/traces/atomic_output.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace exitsim::traces::detail {
namespace {

InputError io_error(const std::string& path, const std::string& message) {
  return InputError(SourceLocation{.file = path, .line = 0, .column = 0, .field = ""}, message);
}

std::error_code errno_code() {
  return {errno, std::generic_category()};
}

constexpr std::string_view k_temp_marker = ".exitsim-";
constexpr std::string_view k_temp_suffix = ".tmp";

// The temporary files open now, for the signal handler: fixed slots of C strings, read there
// without locks or allocation (unlink is async-signal-safe). More files open at once than slots
// go unregistered; the next run's stale sweep still finds them.
constexpr int k_signal_slots = 64;
std::array<std::atomic<const char*>, k_signal_slots> g_open_temporaries{};

// Folders this run made for its outputs: removed by the handler when empty (rmdir refuses
// others), after the temporary files in them.
constexpr int k_directory_slots = 8;
std::array<std::atomic<const char*>, k_directory_slots> g_created_directories{};

// Staging folders of this run's outputs: emptied and removed by the handler.
constexpr int k_staging_slots = 4;
std::array<std::atomic<const char*>, k_staging_slots> g_staging_directories{};

// getdents64's record (the kernel's layout; glibc has no async-signal-safe readdir).
struct KernelDirent {
  std::uint64_t inode;
  std::int64_t offset;
  unsigned short length;
  unsigned char type;
  char name[1];
};

// Unlinks the files of `dir` and removes it, with async-signal-safe calls only. Passes repeat
// while they remove something, since unlinking during a listing may hide later entries.
void empty_and_remove(const char* dir) {
  alignas(8) static char buffer[8192];
  for (int pass = 0; pass < 64; ++pass) {
    const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
      return;
    bool removed = false;
    for (long got; (got = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer)) > 0;) {
      for (long at = 0; at < got;) {
        const auto* entry = reinterpret_cast<const KernelDirent*>(buffer + at);
        const bool dots =
            entry->name[0] == '.' &&
            (entry->name[1] == '\0' || (entry->name[1] == '.' && entry->name[2] == '\0'));
        if (!dots && ::unlinkat(fd, entry->name, 0) == 0)
          removed = true;
        at += entry->length;
      }
    }
    ::close(fd);
    if (!removed)
      break;
  }
  ::rmdir(dir);
}

extern "C" void remove_temporaries_and_reraise(int signal_number) {
  for (std::atomic<const char*>& slot : g_open_temporaries) {
    if (const char* path = slot.load(); path != nullptr)
      ::unlink(path);
  }
  for (std::atomic<const char*>& slot : g_staging_directories) {
    if (const char* path = slot.load(); path != nullptr)
      empty_and_remove(path);
  }
  for (std::atomic<const char*>& slot : g_created_directories) {
    if (const char* path = slot.load(); path != nullptr)
      ::rmdir(path);
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_signal_handlers() {
  static const bool installed = [] {
    for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction action {};
      action.sa_handler = remove_temporaries_and_reraise;
      sigemptyset(&action.sa_mask);
      sigaction(signal_number, &action, nullptr);
    }
    return true;
  }();
  (void)installed;
}

template <std::size_t N>
int register_in(std::array<std::atomic<const char*>, N>& slots, const char* path) {
  install_signal_handlers();
  for (std::size_t i = 0; i < N; ++i) {
    const char* expected = nullptr;
    if (slots[i].compare_exchange_strong(expected, path))
      return static_cast<int>(i);
  }
  return -1;
}

int register_temporary(const char* path) {
  return register_in(g_open_temporaries, path);
}

void unregister_temporary(int slot) {
  if (slot >= 0)
    g_open_temporaries[static_cast<std::size_t>(slot)].store(nullptr);
}

}  // namespace

int register_staging_directory(const char* path) {
  return register_in(g_staging_directories, path);
}

void unregister_staging_directory(int slot) {
  if (slot >= 0)
    g_staging_directories[static_cast<std::size_t>(slot)].store(nullptr);
}

namespace {

// The pid in "<name>.exitsim-<pid>.tmp", or 0 when `name` is not such a file.
pid_t temporary_owner(const std::string& name) {
  if (!name.ends_with(k_temp_suffix))
    return 0;
  const std::size_t marker = name.rfind(k_temp_marker);
  if (marker == std::string::npos)
    return 0;
  const std::size_t begin = marker + k_temp_marker.size();
  const std::size_t end = name.size() - k_temp_suffix.size();
  long long pid = 0;
  const auto [at, error] = std::from_chars(name.data() + begin, name.data() + end, pid);
  if (error != std::errc() || at != name.data() + end || pid <= 0)
    return 0;
  return static_cast<pid_t>(pid);
}

bool process_running(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

std::string AtomicOutputFile::temp_path_for(const std::string& path) {
  return fmt::format("{}{}{}{}", path, k_temp_marker, ::getpid(), k_temp_suffix);
}

InputError AtomicOutputFile::default_error(const AtomicOutputFile& file, Step step,
                                           std::error_code reason) {
  switch (step) {
    case Step::create:
      return io_error(file.path(),
                      fmt::format("cannot create {}: {}", file.temp_path(), reason.message()));
    case Step::write:
      break;
    case Step::rename:
      return io_error(file.path(),
                      fmt::format("cannot rename {}: {}", file.temp_path(), reason.message()));
  }
  return io_error(file.path(), fmt::format("cannot write {}", file.temp_path()));
}

AtomicOutputFile::AtomicOutputFile(std::string path, ErrorHook on_error)
    : path_(std::move(path)), temp_path_(temp_path_for(path_)), on_error_(on_error) {
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  remove_stale_temporaries(parent.empty() ? "." : parent.string());
  errno = 0;
  out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw on_error_(*this, Step::create, errno_code());
  signal_slot_ = register_temporary(temp_path_.c_str());
}

AtomicOutputFile::~AtomicOutputFile() {
  unregister_temporary(signal_slot_);
  if (finished_)
    return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temp_path_, ignored);
}

void AtomicOutputFile::write(std::string_view bytes) {
  if (finished_)
    throw std::logic_error("exitsim: write to " + path_ + " after finish()");
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out_)
    throw on_error_(*this, Step::write, errno_code());
}

void AtomicOutputFile::finish() {
  if (finished_)
    return;
  errno = 0;
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok || out_.fail())
    throw on_error_(*this, Step::write, errno_code());
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec)
    throw on_error_(*this, Step::rename, ec);
  finished_ = true;
  unregister_temporary(signal_slot_);
  signal_slot_ = -1;
}

}  // namespace exitsim::traces::detail

namespace exitsim::traces {

void write_file_atomically(const std::string& path, std::string_view content) {
  detail::AtomicOutputFile file(path);
  file.write(content);
  file.finish();
}

CreatedDirectoryGuard::CreatedDirectoryGuard(std::string path) : path_(std::move(path)) {
  slot_ = detail::register_in(detail::g_created_directories, path_.c_str());
}

CreatedDirectoryGuard::~CreatedDirectoryGuard() {
  release();
}

void CreatedDirectoryGuard::release() {
  if (slot_ >= 0)
    detail::g_created_directories[static_cast<std::size_t>(slot_)].store(nullptr);
  slot_ = -1;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const pid_t owner = detail::temporary_owner(name);
    if (owner == 0 || owner == ::getpid() || detail::process_running(owner))
      continue;
    std::error_code removing;
    // A staging folder (StagedOutputDirectory) goes with what the dead run had written in it.
    if (std::filesystem::remove_all(it->path(), removing) > 0 && !removing) {
      removed.push_back(it->path().string());
      fmt::print(stderr, "exitsim: note: removed {}, left by an interrupted run (pid {})\n",
                 it->path().string(), owner);
    }
  }
  return removed;
}

}  // namespace exitsim::traces
