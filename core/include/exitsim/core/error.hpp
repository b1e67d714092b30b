#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace exitsim {

// Where a user-supplied value came from. Any field may be empty/zero when unknown.
struct SourceLocation {
  std::string file;         // path as the user gave it, or "<embedded default>", "--set"
  std::int64_t line = 0;    // 1-based; 0 = unknown
  std::int64_t column = 0;  // 1-based; 0 = unknown
  std::string field;        // key path ("scheduler.max_running") or column name ("ContextTokens")
};

// An error the user caused and can fix: bad file, bad field, impossible configuration, missing
// device. The message says what was expected and what was found; what() is one line:
//   file:line:column: field: message
// The CLI prints it and exits non-zero; no other exception type is shown to users as-is.
class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, const std::string& message);

  const SourceLocation& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  SourceLocation where_;
  std::string message_;
};

// "expected <expected>, found <found>" - the shape every InputError message takes when it can.
std::string expected_found(const std::string& expected, const std::string& found);

// A library exception's description without its "[library.code] " prefix (nlohmann's
// "[json.exception.out_of_range.406] number overflow parsing '1e400'").
std::string library_message(const std::exception& error);

// `text` as error messages show it: one line (newlines and tabs as spaces), other control bytes
// as \xNN, the middle of an over-long text cut. For console lines that echo a file's text.
std::string one_safe_line(const std::string& text);

// Throws InputError for a setting (no file position) whose value is not what was expected.
[[noreturn]] void throw_setting_error(const std::string& field, const std::string& expected,
                                      const std::string& found);

}  // namespace exitsim
