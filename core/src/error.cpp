#include "exitsim/core/error.hpp"

#include <fmt/format.h>

namespace exitsim {
namespace {

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
  // One line, always: embedded newlines would split the message across log lines.
  for (char& c : out) {
    if (c == '\n' || c == '\r')
      c = ' ';
  }
  return out;
}

}  // namespace

InputError::InputError(SourceLocation where, const std::string& message)
    : std::runtime_error(render(where, message)), where_(std::move(where)), message_(message) {}

std::string expected_found(const std::string& expected, const std::string& found) {
  return fmt::format("expected {}, found {}", expected, found);
}

void throw_setting_error(const std::string& field, const std::string& expected,
                         const std::string& found) {
  throw InputError({"", 0, 0, field}, expected_found(expected, found));
}

}  // namespace exitsim
