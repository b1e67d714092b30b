#include "exitsim/core/json_input.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/input_file.hpp"

namespace exitsim {
namespace {

using nlohmann::json;

constexpr std::size_t k_chunk_bytes = std::size_t{1} << 16;

// Thrown from inside the parse (the byte source or the parser callback) and turned into an
// InputError naming the file outside it; a reader's own InputError passes through unchanged.
struct Refusal {
  std::string message;
  bool not_json = false;  // message is what was found instead of the reader's `what`
};

// Where the parser reads from: chunks of bytes (the whole text at once, or 64 KiB of a file or
// of an inflating gzip stream), counted against the cap, each checked for NUL as it arrives.
class ByteSource {
 public:
  explicit ByteSource(std::uint64_t max_bytes, std::string cap_what)
      : max_bytes_(max_bytes), cap_what_(std::move(cap_what)) {}
  virtual ~ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool at_end() { return next_ == end_ && !refill(); }
  char current() const { return *next_; }
  // Past the byte just read. A run of whitespace between tokens reaches the parser as its first
  // byte only: nlohmann keeps every byte since the last string or number for its messages, so a
  // gigabyte of spaces (a small gzip) would otherwise be held whole.
  void advance() {
    const char c = *next_++;
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (is_whitespace(c)) {
      while (!at_end() && is_whitespace(*next_))
        ++next_;
    }
  }
  // 1-based offset of the byte last read, as nlohmann's parse_error.byte counts (the end of the
  // input is one past the last byte).
  std::uint64_t offset() const {
    return before_chunk_ + static_cast<std::uint64_t>(next_ - begin_) + (exhausted_ ? 1 : 0);
  }

 protected:
  // Makes [begin, end) the next chunk; false at the end of the input.
  virtual bool read_chunk(const char*& begin, const char*& end) = 0;

 private:
  bool refill() {
    before_chunk_ += static_cast<std::uint64_t>(end_ - begin_);
    begin_ = next_ = end_;  // counted
    const char* begin = nullptr;
    const char* end = nullptr;
    if (!read_chunk(begin, end) || begin == end) {
      exhausted_ = true;
      return false;
    }
    if (before_chunk_ == 0 && std::string_view(begin, end).starts_with("\xEF\xBB\xBF"))
      begin += 3;  // a UTF-8 BOM, which RFC 8259 lets a reader skip
    begin_ = next_ = begin;
    end_ = end;
    const auto size = static_cast<std::uint64_t>(end - begin);
    if (before_chunk_ + size > max_bytes_) {
      throw Refusal{expected_found(
          fmt::format("at most {} of {}", mebibytes(max_bytes_), cap_what_), "more")};
    }
    if (const void* nul = std::memchr(begin, '\0', size); nul != nullptr) {
      const auto at =
          before_chunk_ + static_cast<std::uint64_t>(static_cast<const char*>(nul) - begin);
      throw Refusal{fmt::format("a NUL byte at byte {}", at + 1), true};
    }
    return true;
  }

  static bool is_whitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

  std::uint64_t max_bytes_;
  std::string cap_what_;
  bool in_string_ = false;
  bool escaped_ = false;
  bool exhausted_ = false;
  std::uint64_t before_chunk_ = 0;
  const char* begin_ = nullptr;
  const char* next_ = nullptr;
  const char* end_ = nullptr;
};

class TextSource final : public ByteSource {
 public:
  TextSource(std::string_view text, std::uint64_t max_bytes)
      : ByteSource(max_bytes, "JSON"), text_(text) {}

 private:
  bool read_chunk(const char*& begin, const char*& end) override {
    if (done_)
      return false;
    done_ = true;
    begin = text_.data();
    end = text_.data() + text_.size();
    return true;
  }
  std::string_view text_;
  bool done_ = false;
};

class StreamSource final : public ByteSource {
 public:
  StreamSource(std::istream& in, std::uint64_t max_bytes)
      : ByteSource(max_bytes, "JSON"), in_(in) {}

 private:
  bool read_chunk(const char*& begin, const char*& end) override {
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    begin = buffer_.data();
    end = begin + in_.gcount();
    return in_.gcount() > 0;
  }
  std::istream& in_;
  std::array<char, k_chunk_bytes> buffer_{};
};

// zlib's streaming inflate (gzread), 64 KiB at a time: the inflated text is never held whole.
class GzipSource final : public ByteSource {
 public:
  GzipSource(gzFile file, std::uint64_t max_bytes)
      : ByteSource(max_bytes, "JSON once inflated"), file_(file, gzclose) {}

 private:
  bool read_chunk(const char*& begin, const char*& end) override {
    const int n = gzread(file_.get(), buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) {
      int code = 0;
      throw Refusal{expected_found("a readable gzip file", gzerror(file_.get(), &code))};
    }
    begin = buffer_.data();
    end = begin + n;
    return n > 0;
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
  std::array<char, k_chunk_bytes> buffer_{};
};

// An input iterator over a ByteSource for nlohmann's iterator input adapter; copies share the
// source, and every end iterator equals any iterator whose source is exhausted.
class SourceIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  SourceIterator() = default;
  explicit SourceIterator(ByteSource* source) : source_(source) {}

  char operator*() const { return source_->current(); }
  SourceIterator& operator++() {
    source_->advance();
    return *this;
  }
  // Never called here, but an input iterator must have it (the JSON parser's iterator adapter
  // is written against the concept).
  [[maybe_unused]] SourceIterator operator++(int) {
    SourceIterator before = *this;
    source_->advance();
    return before;
  }
  bool operator==(const SourceIterator& other) const { return at_end() == other.at_end(); }

 private:
  bool at_end() const { return source_ == nullptr || source_->at_end(); }
  ByteSource* source_ = nullptr;
};

// The keys of one open object: a short list while small (most objects have a few keys), a hash
// set once large (a tokenizer's vocab has 128,000).
class KeySet {
 public:
  bool insert(const std::string& key) {
    constexpr std::size_t k_listed = 16;
    if (!large_.empty())
      return large_.insert(key).second;
    if (std::find(small_.begin(), small_.end(), key) != small_.end())
      return false;
    small_.push_back(key);
    if (small_.size() > k_listed) {
      large_.insert(small_.begin(), small_.end());
      small_.clear();
    }
    return true;
  }

 private:
  std::vector<std::string> small_;
  std::unordered_set<std::string> large_;
};

// The limits as nlohmann's parser callback, in front of a reader's own filter. nlohmann calls
// the callback at every start, but at an end only for a container that was kept: so a reader's
// filter may drop a value at its end event only (or the open objects here would fall out of step).
class LimitChecker {
 public:
  LimitChecker(const ByteSource& source, const JsonFilter& filter)
      : source_(source), filter_(filter) {}

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= k_max_json_nesting) {
          throw Refusal{
              expected_found(fmt::format("at most {} levels of nesting", k_max_json_nesting),
                             fmt::format("deeper nesting at byte {}", source_.offset()))};
        }
        if (event == json::parse_event_t::object_start)
          open_objects_.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects_.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects_.back().insert(parsed.get_ref<const std::string&>())) {
          throw Refusal{expected_found(
              "each key once per object",
              fmt::format("the key {} again at byte {}", json_shown(parsed), source_.offset()))};
        }
        break;
      default:
        break;
    }
    return !filter_ || filter_(depth, event, parsed);
  }

 private:
  const ByteSource& source_;
  const JsonFilter& filter_;
  std::vector<KeySet> open_objects_;
};

json parse_source(ByteSource& source, const JsonInput& input, const JsonFilter& filter) {
  const SourceLocation where{input.file, 0, 0, ""};
  try {
    LimitChecker check(source, filter);
    return json::parse(SourceIterator(&source), SourceIterator(),
                       [&check](int depth, json::parse_event_t event, json& parsed) {
                         return check(depth, event, parsed);
                       });
  } catch (const Refusal& refusal) {
    if (refusal.not_json)
      throw InputError(where, expected_found(input.what, refusal.message));
    throw InputError(where, refusal.message);
  } catch (const json::parse_error&) {
    // At the source's offset: nlohmann's count skips the whitespace runs ByteSource collapses.
    throw InputError(
        where,
        expected_found(input.what, fmt::format("invalid JSON at byte {}",
                                               std::max<std::uint64_t>(source.offset(), 1))));
  } catch (const json::out_of_range& e) {  // 1e400: number overflow
    throw InputError(
        where, expected_found("JSON numbers within the range of a double", library_message(e)));
  }
}

// The size of a regular file; nullopt for a pipe or other stream, which the reading caps.
std::optional<std::uint64_t> regular_file_size(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return std::nullopt;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? std::nullopt : std::optional<std::uint64_t>(size);
}

void check_size(const std::string& path, std::optional<std::uint64_t> size, std::uint64_t max_bytes,
                std::string_view what) {
  if (size && *size > max_bytes) {
    throw InputError({path, 0, 0, ""},
                     expected_found(fmt::format("at most {} of {}", mebibytes(max_bytes), what),
                                    fmt::format("{} bytes", *size)));
  }
}

bool starts_with_gzip_magic(std::istream& in) {
  std::array<char, 2> magic{};
  in.read(magic.data(), 2);
  const bool gzip = in.gcount() == 2 && static_cast<unsigned char>(magic[0]) == 0x1f &&
                    static_cast<unsigned char>(magic[1]) == 0x8b;
  in.clear();
  in.seekg(0);
  return gzip;
}

}  // namespace

json parse_json(std::string_view text, const JsonInput& input, const JsonFilter& filter) {
  check_size(input.file, text.size(), input.max_bytes, "JSON");
  TextSource source(text, input.max_bytes);
  return parse_source(source, input, filter);
}

json parse_json(std::istream& in, const JsonInput& input, const JsonFilter& filter) {
  StreamSource source(in, input.max_bytes);
  return parse_source(source, input, filter);
}

json read_json_file(const JsonInput& input, const JsonFilter& filter) {
  std::ifstream in = open_input_file(input.file, input.file_kind);
  const std::optional<std::uint64_t> size = regular_file_size(input.file);
  if (input.max_gzip_bytes > 0 && size && starts_with_gzip_magic(in)) {
    check_size(input.file, size, input.max_gzip_bytes, "gzip");
    in.close();
    gzFile file = gzopen(input.file.c_str(), "rb");
    if (file == nullptr)
      throw InputError({input.file, 0, 0, ""}, "cannot open the " + input.file_kind);
    GzipSource source(file, input.max_bytes);
    return parse_source(source, input, filter);
  }
  check_size(input.file, size, input.max_bytes, "JSON");
  return parse_json(in, input, filter);
}

std::string read_text_file(const std::string& path, std::uint64_t max_bytes,
                           std::string_view what) {
  std::ifstream in = open_input_file(path, what);
  check_size(path, regular_file_size(path), max_bytes, what);
  std::string text;
  std::array<char, k_chunk_bytes> chunk{};
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw InputError(
          {path, 0, 0, ""},
          expected_found(fmt::format("at most {} of {}", mebibytes(max_bytes), what), "more"));
    }
  }
  if (in.bad())
    throw InputError({path, 0, 0, ""},
                     fmt::format("cannot read the {}: {}", what, std::strerror(errno)));
  return text;
}

namespace {

constexpr std::size_t k_max_shown_bytes = 60;

// Appends `value`'s JSON text to `out` until out holds more than k_max_shown_bytes: a string is
// cut before it is escaped, a container stops at the element that passes the cut.
void append_shown(const json& value, std::string& out) {
  const auto full = [&out] { return out.size() > k_max_shown_bytes; };
  switch (value.type()) {
    case json::value_t::string: {
      // Cut before escaping: a 16 MiB string is not copied to show 60 bytes of it.
      const std::string& text = value.get_ref<const std::string&>();
      out += json(text.substr(0, k_max_shown_bytes + 1))
                 .dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
    case json::value_t::array: {
      out += '[';
      for (auto it = value.begin(); it != value.end() && !full(); ++it) {
        if (it != value.begin())
          out += ',';
        append_shown(*it, out);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      for (auto it = value.begin(); it != value.end() && !full(); ++it) {
        if (it != value.begin())
          out += ',';
        append_shown(json(it.key()), out);
        out += ':';
        append_shown(it.value(), out);
      }
      out += '}';
      return;
    }
    default:  // a number, true, false, null, binary: short
      out += value.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
  }
}

}  // namespace

std::string json_shown(const json& value) {
  std::string text;
  append_shown(value, text);
  if (text.size() <= k_max_shown_bytes)
    return text;
  std::size_t cut = k_max_shown_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...";
}

std::string mebibytes(std::uint64_t bytes) {
  constexpr std::uint64_t k_mib = std::uint64_t{1} << 20;
  return bytes % k_mib == 0 ? fmt::format("{} MiB", bytes / k_mib) : fmt::format("{} bytes", bytes);
}

}  // namespace exitsim
