#pragma once

// Reading tokenizer.json values with every failure one InputError line naming the file and the
// key path ("model.merges[3]: expected ..., found ...").

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"

namespace exitsim::text {

using nlohmann::json;

// A JSON value as an error shows it: short values whole, long ones cut, in bounded work.
inline std::string shown(const json& value) {
  return json_shown(value);
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

  // Ids are held near the file's count of vocab entries and added tokens (set_id_limit), so the
  // tables indexed by id stay as large as the file's own entries, give or take k_id_slack.
  static constexpr std::int64_t k_id_slack = 65536;
  void set_id_limit(std::int64_t entries) {
    entries_ = entries;
    id_limit_ =
        std::min<std::int64_t>(entries + k_id_slack, std::numeric_limits<std::int32_t>::max());
  }

  std::int32_t id_value(const json& value, const std::string& key) const {
    const std::string expected =
        fmt::format("a token id in [0, {}] (the file's {} vocab entries and added tokens, plus {})",
                    id_limit_ - 1, entries_, k_id_slack);
    const bool in_range = value.is_number_unsigned()
                              ? value.get<std::uint64_t>() < static_cast<std::uint64_t>(id_limit_)
                          : value.is_number_integer() ? value.get<std::int64_t>() >= 0 &&
                                                            value.get<std::int64_t>() < id_limit_
                                                      : false;
    if (!in_range)
      fail(key, expected, shown(value));
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }

  static std::string join(const std::string& prefix, const char* key) {
    return prefix.empty() ? std::string(key) : prefix + "." + key;
  }

 private:
  const std::string& file_;
  std::int64_t entries_ = 0;
  std::int64_t id_limit_ = k_id_slack;
};

inline std::string quoted_token(const std::string& token) {
  return json(token).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace exitsim::text
