// Typed access to a Hugging Face config's keys (hf_config_keys.hpp).
#include "hf_config_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "exitsim/core/suggest.hpp"

namespace exitsim {
namespace hf {

std::string shown(const json& value) {
  constexpr std::size_t k_longest = 80;
  const std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  return text.size() > k_longest ? text.substr(0, k_longest) + "..." : text;
}

const json* Keys::find(std::string_view key) const {
  const auto it = object_.find(std::string(key));
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

InputError Keys::error(std::string_view key, const std::string& expected,
                       const std::string& found) const {
  return InputError({file_, 0, 0, path(key)}, expected_found(expected, found));
}

std::int64_t Keys::integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                           std::optional<std::int64_t> fallback) const {
  const json* value = find(key);
  const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
  if (value == nullptr) {
    if (fallback)
      return *fallback;
    throw error(key, expected, "none");
  }
  const bool fits = value->is_number_integer() &&
                    (!value->is_number_unsigned() ||
                     value->get<std::uint64_t>() <=
                         static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (!fits || value->get<std::int64_t>() < lo || value->get<std::int64_t>() > hi)
    throw error(key, expected, shown(*value));
  return value->get<std::int64_t>();
}

bool Keys::boolean(std::string_view key, bool fallback) const {
  const json* value = find(key);
  if (value == nullptr)
    return fallback;
  if (!value->is_boolean())
    throw error(key, "true or false", shown(*value));
  return value->get<bool>();
}

std::optional<std::vector<std::int64_t>> Keys::integers(std::string_view key, std::size_t size,
                                                        std::int64_t lo, std::int64_t hi) const {
  const json* value = find(key);
  if (value == nullptr)
    return std::nullopt;
  const std::string expected = fmt::format("a list of {} integers in [{}, {}]", size, lo, hi);
  if (!value->is_array() || value->size() != size)
    throw error(key, expected, shown(*value));
  std::vector<std::int64_t> out;
  for (const json& item : *value) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < lo || item.get<std::int64_t>() > hi)
      throw error(key, expected, shown(*value));
    out.push_back(item.get<std::int64_t>());
  }
  return out;
}

std::optional<std::vector<std::string>> Keys::names(std::string_view key, std::size_t size,
                                                    const std::vector<std::string>& allowed) const {
  const json* value = find(key);
  if (value == nullptr)
    return std::nullopt;
  const std::string expected = fmt::format("a list of {} names, each {}", size, one_of(allowed));
  if (!value->is_array() || value->size() != size)
    throw error(key, expected, shown(*value));
  std::vector<std::string> out;
  for (const json& item : *value) {
    if (!item.is_string() ||
        std::find(allowed.begin(), allowed.end(), item.get<std::string>()) == allowed.end())
      throw error(key, expected, shown(item));
    out.push_back(item.get<std::string>());
  }
  return out;
}

void Keys::require_absent_or(std::string_view key, const json& fine, const std::string& why) const {
  const json* value = find(key);
  if (value != nullptr && *value != fine)
    throw error(key, shown(fine) + " (" + why + ")", shown(*value));
}

Keys Keys::nested(std::string_view key) const {
  const json* value = find(key);
  if (value == nullptr || !value->is_object()) {
    throw error(key, "an object (the language model's config)",
                value == nullptr ? "none" : shown(*value));
  }
  return Keys(*value, file_, path(key) + ".");
}

std::optional<std::vector<bool>> windowed_layer_types(const Keys& keys, std::size_t layers,
                                                      const std::string& windowed) {
  const auto types = keys.names("layer_types", layers, {windowed, "full_attention"});
  if (!types)
    return std::nullopt;
  std::vector<bool> out;
  for (const std::string& type : *types)
    out.push_back(type == windowed);
  return out;
}

}  // namespace hf

}  // namespace exitsim
