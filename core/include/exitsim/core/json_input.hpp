#pragma once

// The one way exitsim reads JSON written by someone else (traces, tokenizer.json, Kineto traces,
// benchmark results, plans, validations, cost profiles, model configs), with the same limits
// everywhere, each refused as one InputError line naming the file:
//   - at most k_max_json_nesting levels of arrays and objects, refused while parsing, before the
//     tree is built (a 100,000-deep array would otherwise overflow the stack of every recursive
//     walk of it, dump() included);
//   - a key at most once per object: "last one wins" would pick one of two values silently;
//   - no NUL byte (nlohmann ends the text at one, ignoring what follows);
//   - a file size cap and, for gzip, a cap on the inflated size, both checked while reading, so
//     a 1 MB gzip that inflates to 3 GB is refused after the cap, not after the 3 GB.

#include <cstdint>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace exitsim {

inline constexpr int k_max_json_nesting = 32;

// A reader's own view of the parse (nlohmann's parser callback): returning false drops the value,
// which lets a reader keep one element of a huge array at a time. Called after the limits' checks.
using JsonFilter =
    std::function<bool(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed)>;

// How one JSON input is read: `what` completes "expected ..." when the text is not JSON.
struct JsonInput {
  std::string file;                     // as messages name it
  std::string what = "JSON";            // "a ShareGPT JSON array of conversations"
  std::uint64_t max_bytes = 16u << 20;  // of JSON text (for gzip: once inflated)
  // The compressed file's cap for a reader that accepts gzip (0: gzip is not read, a gzip file is
  // malformed JSON). The inflated text stays within max_bytes.
  std::uint64_t max_gzip_bytes = 0;
  std::string file_kind = "JSON file";  // "cannot open the <file_kind>: No such file or directory"
};

// Parses `text` (a UTF-8 BOM before it is skipped, as RFC 8259 allows) under the limits above;
// `input.max_bytes` caps the text. Failures, each an InputError naming input.file:
//   expected <what>, found invalid JSON at byte N
//   expected <what>, found a NUL byte at byte N
//   expected JSON numbers within the range of a double, found number overflow parsing '1e400'
//   expected at most 32 levels of nesting, found deeper nesting at byte N
//   expected each key once per object, found the key "k" again at byte N
//   expected at most N MiB of JSON, found M bytes
nlohmann::json parse_json(std::string_view text, const JsonInput& input,
                          const JsonFilter& filter = nullptr);

// The same from a stream, read in chunks: memory holds what `filter` keeps, not the text.
nlohmann::json parse_json(std::istream& in, const JsonInput& input,
                          const JsonFilter& filter = nullptr);

// Reads and parses the file input.file: a regular file of at most input.max_bytes (or, where
// input.max_gzip_bytes > 0, a gzip file of at most that many bytes inflating to at most
// input.max_bytes), streamed into the parser. A file that cannot be opened: "cannot open the
// <file_kind>: <reason>".
nlohmann::json read_json_file(const JsonInput& input, const JsonFilter& filter = nullptr);

// The whole file as text, refused beyond `max_bytes` (read in chunks, so a pipe is capped too):
// "expected at most N MiB of <what>, found M bytes" ("found more" for a pipe); a file that cannot
// be opened: "cannot open the <what>: <reason>".
std::string read_text_file(const std::string& path, std::uint64_t max_bytes, std::string_view what);

// How a JSON value appears after "found" in a message: its JSON text on one line (strings quoted
// and escaped, control bytes included), cut after about 60 bytes at a character boundary with
// "...". Bounded work whatever the value's size: containers are written element by element and
// only until the cut, never dump()ed whole.
std::string json_shown(const nlohmann::json& value);

// A cap in messages: "16 MiB", "1024 MiB"; "1000 bytes" where it is not a whole MiB.
std::string mebibytes(std::uint64_t bytes);

}  // namespace exitsim
