#include "weights/strict_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <system_error>
#include <vector>

#include "exitsim/core/error.hpp"
#include "exitsim/core/suggest.hpp"

namespace exitsim::engine::detail {
namespace {

// Thrown from inside the parser callback and turned into an InputError outside it.
struct Refusal {
  std::string message;
};

// The value as an int64, or nullopt when it is not an integer or does not fit.
std::optional<std::int64_t> as_int64(const nlohmann::json& value) {
  if (!value.is_number_integer())
    return std::nullopt;
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return std::nullopt;
  }
  return value.get<std::int64_t>();
}

}  // namespace

std::string json_quoted(std::string_view key) {
  constexpr std::size_t k_longest = 80;
  const bool cut = key.size() > k_longest;
  const std::string text =
      nlohmann::json(std::string(cut ? key.substr(0, k_longest) : key))
          .dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  return cut ? text + "..." : text;
}

nlohmann::json parse_strict_json(std::string_view text, const std::string& file,
                                 const std::string& field, int max_depth) {
  // nlohmann stops at a NUL as at the end: bytes after one would be ignored without a word.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw InputError({file, 0, 0, field},
                     expected_found("JSON text", fmt::format("a NUL byte at offset {}", nul)));
  }
  std::vector<std::set<std::string>> open_objects;
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= max_depth) {
          throw Refusal{expected_found(fmt::format("at most {} levels of nesting", max_depth),
                                       "deeper nesting")};
        }
        if (event == Event::object_start)
          open_objects.emplace_back();
        break;
      case Event::object_end:
        open_objects.pop_back();
        break;
      case Event::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second) {
          throw Refusal{
              expected_found("each key once per object",
                             "the key " + json_quoted(parsed.get<std::string>()) + " twice")};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const Refusal& refusal) {
    throw InputError({file, 0, 0, field}, refusal.message);
  } catch (const nlohmann::json::exception& e) {
    // A parse error, or a number beyond a double (1e400: out_of_range), in the library's words.
    throw InputError({file, 0, 0, field}, expected_found("valid JSON", library_message(e)));
  }
}

std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  const std::string shown = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const bool exists = std::filesystem::exists(path, ec);
    throw InputError({shown, 0, 0, ""},
                     expected_found("a readable file", exists ? "something else" : "none"));
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw InputError({shown, 0, 0, ""}, "cannot read the file size: " + ec.message());
  if (size > max_bytes) {
    throw InputError({shown, 0, 0, ""}, expected_found(fmt::format("at most {} bytes", max_bytes),
                                                       fmt::format("{} bytes", size)));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw InputError({shown, 0, 0, ""}, "cannot read the file");
  return text;
}

std::string describe_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
    case nlohmann::json::value_t::array: {
      // Short containers are shown whole ("[2, -1]" says more than "an array").
      const bool is_object = value.is_object();
      const std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
      if (text.size() <= 60)
        return (is_object ? "the object " : "the array ") + text;
      return is_object ? "an object" : "an array";
    }
    case nlohmann::json::value_t::string:
      return "the string " + json_quoted(value.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "the number " + value.dump();
    default:
      return "a binary value";
  }
}

const nlohmann::json* ObjectReader::find(std::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || (null_is_absent_ && it->is_null()))
    return nullptr;
  return &*it;
}

InputError ObjectReader::error(std::string_view key, const std::string& expected,
                               const std::string& found) const {
  return InputError({file_, 0, 0, field(key)}, expected_found(expected, found));
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                                   std::optional<std::int64_t> fallback) const {
  const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
  const nlohmann::json* value = find(key);
  if (value == nullptr) {
    if (fallback)
      return *fallback;
    throw error(key, expected, "none");
  }
  const std::optional<std::int64_t> number = as_int64(*value);
  if (!number || *number < lo || *number > hi)
    throw error(key, expected, describe_json(*value));
  return *number;
}

double ObjectReader::positive_number(std::string_view key, std::optional<double> fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) {
    if (fallback)
      return *fallback;
    throw error(key, "a positive number", "none");
  }
  if (!value->is_number())
    throw error(key, "a positive number", describe_json(*value));
  const auto number = value->get<double>();
  if (!(number > 0) || !std::isfinite(number))
    throw error(key, "a positive number", describe_json(*value));
  return number;
}

float ObjectReader::positive_float(std::string_view key, float fallback) const {
  const double number = positive_number(key, fallback);
  constexpr auto lowest = static_cast<double>(std::numeric_limits<float>::min());
  constexpr auto highest = static_cast<double>(std::numeric_limits<float>::max());
  if (number < lowest || number > highest) {
    throw error(
        key, fmt::format("a positive number a float holds, from {:.2g} to {:.2g}", lowest, highest),
        describe_json(*find(key)));
  }
  return static_cast<float>(number);
}

bool ObjectReader::boolean(std::string_view key, std::optional<bool> fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) {
    if (fallback)
      return *fallback;
    throw error(key, "true or false", "none");
  }
  if (!value->is_boolean())
    throw error(key, "true or false", describe_json(*value));
  return value->get<bool>();
}

std::string ObjectReader::string(std::string_view key, std::optional<std::string> fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) {
    if (fallback)
      return *fallback;
    throw error(key, "a string", "none");
  }
  if (!value->is_string())
    throw error(key, "a string", describe_json(*value));
  return value->get<std::string>();
}

std::vector<int> ObjectReader::integers(std::string_view key, int lo, int hi) const {
  const std::string expected = fmt::format("an array of integers in [{}, {}]", lo, hi);
  const nlohmann::json* value = find(key);
  if (value == nullptr)
    return {};
  if (!value->is_array())
    throw error(key, expected, describe_json(*value));
  std::vector<int> out;
  for (const nlohmann::json& item : *value) {
    const std::optional<std::int64_t> number = as_int64(item);
    if (!number || *number < lo || *number > hi)
      throw error(key, expected, describe_json(item) + " in the array");
    out.push_back(static_cast<int>(*number));
  }
  return out;
}

const nlohmann::json* ObjectReader::object(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value != nullptr && !value->is_object())
    throw error(key, "an object", describe_json(*value));
  return value;
}

void ObjectReader::reject_unknown(std::span<const std::string> known) const {
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end())
      continue;
    const std::string near = nearest_match(key, known);
    const std::string hint =
        near.empty() ? "expected " + one_of(known) : fmt::format("did you mean \"{}\"?", near);
    throw InputError({file_, 0, 0, field(key)},
                     fmt::format("unknown key {}; {}", json_quoted(key), hint));
  }
}

}  // namespace exitsim::engine::detail
