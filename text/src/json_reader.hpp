#pragma once

// Reading tokenizer.json values with every failure one InputError line naming the file and the
// key path ("model.merges[3]: expected ..., found ...").

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "exitsim/core/error.hpp"

namespace exitsim::text {

using nlohmann::json;

inline constexpr std::size_t k_max_shown_chars = 60;

// A JSON value as an error shows it: short values whole, long ones cut.
inline std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > k_max_shown_chars)
    text = text.substr(0, k_max_shown_chars) + "...";
  return text;
}

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const {
    throw InputError(SourceLocation{file_, 0, 0, key}, expected_found(expected, found));
  }

  const json& member(const json& object, const std::string& prefix, const char* key,
                     const char* expected) const {
    const auto it = object.find(key);
    if (it == object.end())
      fail(join(prefix, key), expected, "none");
    return *it;
  }

  const json& object_member(const json& object, const std::string& prefix, const char* key) const {
    const json& value = member(object, prefix, key, "an object");
    if (!value.is_object())
      fail(join(prefix, key), "an object", shown(value));
    return value;
  }

  std::string string_member(const json& object, const std::string& prefix, const char* key,
                            const char* expected) const {
    const json& value = member(object, prefix, key, expected);
    if (!value.is_string())
      fail(join(prefix, key), expected, shown(value));
    return value.get<std::string>();
  }

  bool bool_member(const json& object, const std::string& prefix, const char* key,
                   bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
      return fallback;
    if (!it->is_boolean())
      fail(join(prefix, key), "true or false", shown(*it));
    return it->get<bool>();
  }

  std::int32_t id_value(const json& value, const std::string& key) const {
    const std::string expected =
        fmt::format("a token id in [0, {}]", std::numeric_limits<std::int32_t>::max() - 1);
    if (!value.is_number_integer())
      fail(key, expected, shown(value));
    if (value.is_number_unsigned()
            ? value.get<std::uint64_t>() >= std::numeric_limits<std::int32_t>::max()
            : value.get<std::int64_t>() < 0 ||
                  value.get<std::int64_t>() >= std::numeric_limits<std::int32_t>::max())
      fail(key, expected, shown(value));
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }

  static std::string join(const std::string& prefix, const char* key) {
    return prefix.empty() ? std::string(key) : prefix + "." + key;
  }

 private:
  const std::string& file_;
};

inline std::string quoted_token(const std::string& token) {
  return json(token).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace exitsim::text
