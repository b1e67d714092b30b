#include "exitsim/traces/atomic_output.hpp"

#include <fmt/format.h>

#include <cerrno>
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

}  // namespace

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
    : path_(std::move(path)), temp_path_(path_ + ".tmp"), on_error_(on_error) {
  errno = 0;
  out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw on_error_(*this, Step::create, errno_code());
}

AtomicOutputFile::~AtomicOutputFile() {
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
}

}  // namespace exitsim::traces::detail

namespace exitsim::traces {

void write_file_atomically(const std::string& path, std::string_view content) {
  detail::AtomicOutputFile file(path);
  file.write(content);
  file.finish();
}

}  // namespace exitsim::traces
