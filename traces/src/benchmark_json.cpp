#include "benchmark_json.hpp"

#include <fmt/format.h>

#include <cmath>

#include "exitsim/core/error.hpp"
#include "exitsim/core/request.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces::benchmark_json {

JsonPlace JsonPlace::nested(const std::string& key) const {
  return JsonPlace(path_, line_, key_path(key) + ".");
}

std::string JsonPlace::key_path(const std::string& key) const {
  if (key.empty() && !prefix_.empty())
    return prefix_.substr(0, prefix_.size() - 1);  // the object itself, without its dot
  return prefix_ + key;
}

void JsonPlace::fail(const std::string& key, const std::string& expected,
                     const std::string& found) const {
  throw InputError(SourceLocation{path_, line_, 0, key_path(key)}, expected_found(expected, found));
}

const json& JsonPlace::required(const json& object, const std::string& key,
                                const std::string& expected) const {
  const auto it = object.find(key);
  if (it == object.end())
    fail(key, expected, "none");
  return *it;
}

const json* JsonPlace::optional(const json& object, const std::string& key) const {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const json& JsonPlace::object(const json& object, const std::string& key) const {
  const json& value = required(object, key, "an object");
  if (!value.is_object())
    fail(key, "an object", json_shown(value));
  return value;
}

std::string JsonPlace::text(const json& object, const std::string& key) const {
  const json* value = optional(object, key);
  if (value == nullptr)
    return "";
  if (!value->is_string())
    fail(key, "a string", json_shown(*value));
  return value->get<std::string>();
}

double JsonPlace::number(const json& value, const std::string& key,
                         const std::string& expected) const {
  if (!value.is_number())
    fail(key, expected, json_shown(value));
  const double v = value.get<double>();
  if (!std::isfinite(v))
    fail(key, expected, json_shown(value));
  return v;
}

std::int64_t JsonPlace::count(const json& value, const std::string& key, std::int64_t least) const {
  const std::string expected = fmt::format("an integer token count >= {}", least);
  if (!value.is_number_integer())
    fail(key, expected, json_shown(value));
  const auto v = value.get<std::int64_t>();
  if (v < least || v > k_max_request_tokens)
    fail(key, fmt::format("{} (at most 2^31)", expected), json_shown(value));
  return v;
}

TimeNs JsonPlace::seconds(const json& value, const std::string& key,
                          const std::string& expected) const {
  const double s = number(value, key, expected);
  if (s < 0 || s > k_max_seconds)
    fail(key, expected, json_shown(value));
  return static_cast<TimeNs>(std::llround(s * 1e9));
}

TimeNs JsonPlace::milliseconds(const json& value, const std::string& key,
                               const std::string& expected) const {
  const double ms = number(value, key, expected);
  if (ms < 0 || ms > k_max_seconds * 1e3)
    fail(key, expected, json_shown(value));
  return static_cast<TimeNs>(std::llround(ms * 1e6));
}

std::string failure_of(const std::string& error) {
  return "error: " + error.substr(0, k_max_failure_bytes);
}

void check_request(BenchmarkRequest& request, const JsonPlace& place, const std::string& key) {
  if (request.ttft + request.decode > k_max_request_ns) {
    place.fail(key, fmt::format("a request streaming for at most {} s (a day)", k_max_seconds),
               fmt::format("{:.3f} s from its send to its last token",
                           to_seconds(request.ttft + request.decode)));
  }
  if (!request.failed && request.output_tokens == 0) {
    request.failed = true;
    request.failure = "no output token counted";
  }
  if (!request.failed && request.ttft == 0) {
    request.failed = true;
    request.failure = "no first token timed (ttft 0)";
  }
}

void require_a_success(const ServingBenchmark& run, const JsonPlace& place) {
  const auto n = static_cast<std::int64_t>(run.requests.size());
  if (run.failed_requests() < n)
    return;
  place.fail("",
             "at least one successful request to compare (an empty error, an output and a timed "
             "first token)",
             fmt::format("none of {}", n));
}

}  // namespace exitsim::traces::benchmark_json
