#include "line_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "exitsim/core/csv_fields.hpp"
#include "exitsim/core/error.hpp"

namespace exitsim::traces {
namespace {

constexpr std::size_t k_chunk_bytes = std::size_t{64} << 10;

[[noreturn]] void fail_open(const std::string& path, const std::string& reason) {
  throw InputError(SourceLocation{path, 0, 0, ""}, "cannot open request trace: " + reason);
}

}  // namespace

TraceInput TraceInput::open(const std::string& path) {
  TraceInput input;
  input.path = path;
  std::error_code ec;
  // A directory opens as a stream on Linux and only fails on the first read, with a less clear
  // message; checking first names the real problem.
  if (std::filesystem::is_directory(path, ec))
    fail_open(path, std::strerror(EISDIR));
  errno = 0;
  input.in.open(path, std::ios::binary);
  if (!input.in.is_open()) {
    const int err = errno;
    fail_open(path, err != 0 ? std::strerror(err) : "the file could not be opened");
  }
  input.head.resize(k_chunk_bytes);
  input.in.read(input.head.data(), static_cast<std::streamsize>(input.head.size()));
  if (input.in.bad()) {
    throw InputError(SourceLocation{path, 0, 0, ""},
                     std::string("cannot read request trace: ") + std::strerror(errno));
  }
  const std::streamsize got = input.in.gcount();
  input.at_end = got < static_cast<std::streamsize>(input.head.size());
  input.head.resize(static_cast<std::size_t>(got));
  return input;
}

bool TraceInput::is_regular_file() const {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

LineReader::LineReader(const std::string& path) : LineReader(TraceInput::open(path)) {}

LineReader::LineReader(TraceInput input)
    : path_(std::move(input.path)),
      in_(std::move(input.in)),
      buffer_(std::move(input.head)),
      end_(buffer_.size()),
      eof_(input.at_end) {
  // Later reads fill whole chunks; the head is at most one.
  buffer_.resize(std::max(buffer_.size(), k_chunk_bytes));
}

bool LineReader::refill() {
  if (eof_)
    return false;
  in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  const std::streamsize got = in_.gcount();
  if (in_.bad()) {
    throw InputError(SourceLocation{path_, 0, 0, ""},
                     std::string("cannot read request trace: ") + std::strerror(errno));
  }
  if (got < static_cast<std::streamsize>(buffer_.size()))
    eof_ = true;
  pos_ = 0;
  end_ = static_cast<std::size_t>(got);
  return end_ > 0;
}

bool LineReader::next(std::string_view& line) {
  line_.clear();
  bool any = false;
  for (;;) {
    if (pos_ == end_ && !refill()) {
      if (!any)
        return false;
      break;
    }
    any = true;
    const char* begin = buffer_.data() + pos_;
    const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', end_ - pos_));
    const std::size_t take =
        newline != nullptr ? static_cast<std::size_t>(newline - begin) : end_ - pos_;
    if (line_.size() + take > k_max_line_bytes) {
      throw InputError(
          SourceLocation{path_, line_number_ + 1, 1, ""},
          expected_found("a line of at most " + std::to_string(k_max_line_bytes) + " bytes",
                         "a longer one"));
    }
    line_.append(begin, take);
    pos_ += take;
    if (newline != nullptr) {
      ++pos_;
      break;
    }
  }
  ++line_number_;
  if (!line_.empty() && line_.back() == '\r')
    line_.pop_back();
  line = line_;
  if (line_number_ == 1)
    line = without_utf8_bom(line);
  return true;
}

}  // namespace exitsim::traces
