#include "exitsim/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace exitsim {
namespace {

// Messages echo what the user gave; a 10 MB value or raw control bytes (a terminal escape, a
// NUL that would end the printed C string) must not reach the console as they are.
constexpr std::size_t k_max_message_bytes = 1024;
constexpr std::size_t k_kept_head = 700;
constexpr std::size_t k_kept_tail = 250;

bool utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

std::string render(const SourceLocation& where, const std::string& message) {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += fmt::format(":{}", where.line);
      if (where.column > 0)
        out += fmt::format(":{}", where.column);
    }
    out += ": ";
  }
  if (!where.field.empty())
    out += where.field + ": ";
  out += message;
  return one_safe_line(out);
}

}  // namespace

// One line, always (embedded newlines would split it across log lines), control bytes written
// as \xNN, and the middle of an over-long message cut (its start names the place, its end
// usually what was found), never inside a UTF-8 character.
std::string one_safe_line(const std::string& text) {
  std::string out;
  out.reserve(std::min(text.size(), 2 * k_max_message_bytes));
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t')
      out += ' ';
    else if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  if (out.size() <= k_max_message_bytes)
    return out;
  std::size_t head = k_kept_head;
  while (head > 0 && utf8_continuation(out[head]))
    --head;
  std::size_t tail = out.size() - k_kept_tail;
  while (tail < out.size() && utf8_continuation(out[tail]))
    ++tail;
  return out.substr(0, head) + fmt::format(" [... {} bytes cut ...] ", tail - head) +
         out.substr(tail);
}

InputError::InputError(SourceLocation where, const std::string& message)
    : std::runtime_error(render(where, message)),
      where_(std::move(where)),
      message_(one_safe_line(message)) {}

std::string expected_found(const std::string& expected, const std::string& found) {
  return fmt::format("expected {}, found {}", expected, found);
}

std::string library_message(const std::exception& error) {
  std::string what = error.what();
  if (what.starts_with('[')) {
    if (const std::size_t bracket = what.find("] "); bracket != std::string::npos)
      what.erase(0, bracket + 2);
  }
  return what;
}

void throw_setting_error(const std::string& field, const std::string& expected,
                         const std::string& found) {
  throw InputError({"", 0, 0, field}, expected_found(expected, found));
}

}  // namespace exitsim
