#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace exitsim::traces {

// A file opened once, with its first bytes read ahead. Format detection looks at `head`, and the
// reader then continues the same stream: a pipe or FIFO (`<(...)`, /dev/stdin) cannot be opened
// a second time, so detection and reading must not each open the path.
struct TraceInput {
  std::string path;
  std::ifstream in;
  std::string head;     // the first bytes (up to one read chunk)
  bool at_end = false;  // the head holds the whole file

  // Throws InputError "<path>: cannot open request trace: <reason>".
  static TraceInput open(const std::string& path);
  // Whether `path` is a regular file (which a reader may open again), not a pipe or device.
  bool is_regular_file() const;
};

// Reads a text file one physical line at a time with a fixed-size buffer, so memory stays bounded
// by the longest line rather than the file. Lines come back without their "\n" or "\r\n", and the
// first line without a UTF-8 byte-order mark, so every reader sees the same text whichever editor
// or platform wrote the file.
class LineReader {
 public:
  // Longest line accepted; a file with no newlines (binary data, a wrong path) would otherwise be
  // read whole into memory.
  static constexpr std::size_t k_max_line_bytes = std::size_t{16} << 20;

  // Throws InputError "<path>: cannot open request trace: <reason>".
  explicit LineReader(const std::string& path);
  // Continues an opened input from its first byte (its head, then the stream).
  explicit LineReader(TraceInput input);

  // The next line, or false at the end of the file. The view stays valid until the next call.
  bool next(std::string_view& line);

  // 1-based number of the line last returned (0 before the first).
  std::int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  bool refill();

  std::string path_;
  std::ifstream in_;
  std::string buffer_;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  bool eof_ = false;
  std::string line_;
  std::int64_t line_number_ = 0;
};

}  // namespace exitsim::traces
