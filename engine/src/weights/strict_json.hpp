#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exitsim/core/error.hpp"

// JSON reading shared by the safetensors header and the model configs: files are parsed
// strictly (a duplicate key is an error rather than "last one wins", which would silently pick
// one of two tensors or settings) and every failure is an InputError naming the file.
namespace exitsim::engine::detail {

// Parses `text`. Errors name `file` and `field` (the part of the file the text is, e.g.
// "header"); nesting deeper than `max_depth` containers is refused before it is built, so a
// hostile file cannot make the parser allocate a tower of empty arrays.
nlohmann::json parse_strict_json(std::string_view text, const std::string& file,
                                 const std::string& field, int max_depth);

// The whole file, which must be a regular file of at most `max_bytes`.
std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// A JSON-quoted string for messages, cut to 80 characters: a hostile file's "name" may be
// megabytes long.
std::string json_quoted(std::string_view text);

// How a value reads in a message: "the string \"x\"", "the number -3", "the array [1,-2]" (long
// containers only by kind: "an array"), "null".
std::string describe_json(const nlohmann::json& value);

// Typed, checked access to the keys of one JSON object of a config file. Errors name the file
// and the key path (`prefix` + key) and say what was expected and found. With `null_is_absent`
// a null value counts as a missing key (Hugging Face configs write "head_dim": null).
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& object, std::string file, std::string prefix,
               bool null_is_absent = false)
      : object_(object),
        file_(std::move(file)),
        prefix_(std::move(prefix)),
        null_is_absent_(null_is_absent) {}

  // The value, or nullptr when the key is absent.
  const nlohmann::json* find(std::string_view key) const;
  InputError error(std::string_view key, const std::string& expected,
                   const std::string& found) const;
  std::string field(std::string_view key) const { return prefix_ + std::string(key); }
  const std::string& file() const { return file_; }

  // Each getter throws InputError when the key is absent and has no fallback, or when its value
  // has the wrong type or lies outside the range.
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const;
  double positive_number(std::string_view key, std::optional<double> fallback = std::nullopt) const;
  // A positive number a float holds without turning into 0 or inf (for float-typed fields).
  float positive_float(std::string_view key, float fallback) const;
  bool boolean(std::string_view key, std::optional<bool> fallback = std::nullopt) const;
  std::string string(std::string_view key,
                     std::optional<std::string> fallback = std::nullopt) const;
  std::vector<int> integers(std::string_view key, int lo, int hi) const;  // absent = empty
  // An object-valued key (absent = nullptr).
  const nlohmann::json* object(std::string_view key) const;

  // Throws for the first key not in `known`, suggesting the nearest known one.
  void reject_unknown(std::span<const std::string> known) const;

 private:
  const nlohmann::json& object_;
  std::string file_;
  std::string prefix_;
  bool null_is_absent_;
};

}  // namespace exitsim::engine::detail
