// The report's JSON inputs (--plan, --validation) read with exitsim's JSON limits and checked
// whole before any part of the report reads them: every key the report reads has the type it
// reads it as, so a number written as a string is one line naming the file and the key path,
// not an internal error from deep inside a section.
#include <fmt/format.h>

#include <initializer_list>
#include <limits>

#include "exitsim/core/error.hpp"
#include "exitsim/core/json_input.hpp"
#include "exitsim/traces/json_document.hpp"
#include "report_parts.hpp"

namespace exitsim::analysis::report_parts {
namespace {

using nlohmann::json;

enum class Kind { number, count, string, boolean, object, array, measured };

// One key the report reads. A number may be null (a NaN or infinity written by nlohmann), shown
// as "-"; the other kinds are read with a fallback when absent, never when of another type.
struct Key {
  const char* name;
  Kind kind;
  bool required = false;
};

class DocumentCheck {
 public:
  explicit DocumentCheck(std::string file) : file_(std::move(file)) {}

  // Checks `object` (at key path `at`) has each key of `keys` with its kind; returns it.
  const json& object(const json& value, const std::string& at,
                     std::initializer_list<Key> keys) const {
    if (!value.is_object())
      fail(at, "an object", value);
    for (const Key& key : keys) {
      const std::string path = at.empty() ? key.name : at + "." + key.name;
      const auto it = value.find(key.name);
      if (it == value.end()) {
        if (key.required)
          throw InputError({file_, 0, 0, path}, expected_found(expected(key.kind), "none"));
        continue;
      }
      check(*it, path, key.kind);
    }
    return value;
  }

  // The elements of the array at `key` of `object` (none when absent), with their key paths.
  template <typename Each>
  void elements(const json& object, const std::string& at, const char* key, Each each) const {
    const auto it = object.find(key);
    if (it == object.end())
      return;
    for (std::size_t i = 0; i < it->size(); ++i)
      each((*it)[i], fmt::format("{}{}{}[{}]", at, at.empty() ? "" : ".", key, i));
  }

  [[noreturn]] void fail(const std::string& path, const std::string& expected,
                         const json& found) const {
    throw InputError({file_, 0, 0, path}, expected_found(expected, json_shown(found)));
  }

 private:
  static const char* expected(Kind kind) {
    switch (kind) {
      case Kind::number:
        return "a number (or null)";
      case Kind::count:
        return "an integer from 0 to 2147483647";
      case Kind::string:
        return "a string";
      case Kind::boolean:
        return "true or false";
      case Kind::object:
        return "an object (or null)";
      case Kind::array:
        return "an array";
      case Kind::measured:
        return "a finite number";
    }
    return "";
  }

  void check(const json& value, const std::string& path, Kind kind) const {
    bool ok = false;
    switch (kind) {
      case Kind::number:
        ok = value.is_number() || value.is_null();
        break;
      case Kind::count:
        ok = value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
             value.get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max();
        break;
      case Kind::string:
        ok = value.is_string();
        break;
      case Kind::boolean:
        ok = value.is_boolean();
        break;
      case Kind::object:
        ok = value.is_object() || value.is_null();
        break;
      case Kind::array:
        ok = value.is_array();
        break;
      case Kind::measured:
        ok = value.is_number();
        break;
    }
    if (!ok)
      fail(path, expected(kind), value);
  }

  std::string file_;
};

// The document at `text`, which must be a JSON object of `format`; `option` names it in messages
// when it came without a path.
json format_document(const std::string& text, const std::string& path, const char* option,
                     const char* format) {
  const std::string file = path.empty() ? std::string(option) : path;
  const json j = traces::parse_json_document(text, file, "JSON");
  if (!j.is_object() || !j.contains("format") || j["format"] != format)
    throw InputError(
        {file, 0, 0, path.empty() ? "format" : std::string(option) + ": format"},
        expected_found(fmt::format("\"{}\"", format),
                       j.is_object() && j.contains("format") ? json_shown(j["format"]) : "none"));
  return j;
}

void check_plan(const json& plan, const DocumentCheck& check) {
  check.object(plan, "",
               {{"candidates", Kind::array, true}, {"recommendation", Kind::string, true}});
  check.elements(plan, "", "candidates", [&](const json& c, const std::string& at) {
    check.object(c, at,
                 {{"candidate", Kind::string, true},
                  {"load_key", Kind::string, true},
                  {"max_load_per_replica", Kind::number, true},
                  {"max_load_is_lower_bound", Kind::boolean},
                  {"tpot_p99_ms_at_max", Kind::number, true},
                  {"replicas", Kind::count, true},
                  {"gpus", Kind::count},
                  {"cost_per_hour", Kind::number, true},
                  {"cost_per_million_tokens", Kind::number},
                  {"cost_per_million_tokens_at_capacity", Kind::number},
                  {"recommended", Kind::boolean, true}});
  });
}

void check_validation(const json& v, const DocumentCheck& check) {
  check.object(v, "",
               {{"hardware", Kind::string},
                {"repeats", Kind::count},
                {"warmup_requests", Kind::count},
                {"omp_wait_policy", Kind::string},
                {"speed", Kind::object},
                {"strategies", Kind::array}});
  if (const auto speed = v.find("speed"); speed != v.end() && speed->is_object()) {
    check.object(*speed, "speed",
                 {{"calibration_us", Kind::number},
                  {"start_us", Kind::number},
                  {"end_us", Kind::number},
                  {"change", Kind::number},
                  {"tolerance", Kind::number},
                  {"factor", Kind::number},
                  {"normalized", Kind::boolean}});
  }
  check.elements(v, "", "strategies", [&](const json& s, const std::string& at) {
    check.object(s, at,
                 {{"strategy", Kind::string},
                  {"pass", Kind::boolean},
                  {"same_batches", Kind::object},
                  {"iterations", Kind::object},
                  {"metrics", Kind::array},
                  {"price_change", Kind::number}});
    for (const char* part : {"same_batches", "iterations"}) {
      if (const auto it = s.find(part); it != s.end() && it->is_object()) {
        check.object(*it, at + "." + part,
                     {{"median_ape", Kind::number}, {"target", Kind::number}});
      }
    }
    check.elements(s, at, "metrics", [&](const json& m, const std::string& metric_at) {
      check.object(m, metric_at,
                   {{"metric", Kind::string},
                    {"engine", Kind::number},
                    {"engine_runs", Kind::count},
                    {"engine_min", Kind::number},
                    {"engine_max", Kind::number},
                    {"engine_cv", Kind::number},
                    {"simulated", Kind::number},
                    {"simulated_low", Kind::number},
                    {"simulated_high", Kind::number},
                    {"relative_error", Kind::number},
                    {"target", Kind::number},
                    {"pass", Kind::boolean},
                    {"inside_engine_range", Kind::boolean}});
    });
  });
}

// What the report reads of a run's summary.json (the charts' percentiles, K/V series and exit
// depths, the warnings): a sweep database is a file the user passes, and may have been edited.
void check_run_summary(const json& summary, const DocumentCheck& check) {
  check.object(summary, "",
               {{"tpot_ms", Kind::object, true},
                {"ttft_ms", Kind::object, true},
                {"series", Kind::object, true},
                {"depth", Kind::object, true},
                {"adaptive_threshold", Kind::object},
                {"warnings", Kind::array}});
  if (const auto it = summary.find("adaptive_threshold"); it != summary.end() && !it->is_null()) {
    const json& adaptive = check.object(*it, "adaptive_threshold",
                                        {{"pairs", Kind::measured, true},
                                         {"refits", Kind::measured, true},
                                         {"degenerate_refits", Kind::measured, true},
                                         {"initial_threshold", Kind::measured, true},
                                         {"last_threshold", Kind::measured, true},
                                         {"min_threshold", Kind::measured, true},
                                         {"max_threshold", Kind::measured, true},
                                         {"trajectory", Kind::array, true}});
    check.elements(adaptive, "adaptive_threshold", "trajectory",
                   [&](const json& p, const std::string& at) {
                     check.object(p, at,
                                  {{"time_s", Kind::measured, true},
                                   {"replica", Kind::measured, true},
                                   {"threshold", Kind::measured, true}});
                   });
  }
  for (const char* metric : {"tpot_ms", "ttft_ms"}) {
    check.object(summary[metric], metric,
                 {{"p50", Kind::measured, true},
                  {"p90", Kind::measured, true},
                  {"p95", Kind::measured, true},
                  {"p99", Kind::measured, true}});
  }
  check.object(summary["series"], "series", {{"points", Kind::array, true}});
  check.elements(summary["series"], "series", "points", [&](const json& p, const std::string& at) {
    check.object(p, at, {{"start_ns", Kind::measured, true}, {"kv_usage", Kind::measured, true}});
  });
  const json& depth =
      check.object(summary["depth"], "depth", {{"exit_depth_tokens", Kind::object, true}});
  for (const auto& [layers, tokens] : depth["exit_depth_tokens"].items()) {
    const std::string at = "depth.exit_depth_tokens." + layers;
    if (layers.empty() || layers.size() > 9 ||
        layers.find_first_not_of("0123456789") != std::string::npos)
      check.fail(at, "a depth in layers as the key", json(layers));
    check.object(depth["exit_depth_tokens"], "depth.exit_depth_tokens",
                 {{layers.c_str(), Kind::measured, true}});
  }
  check.elements(summary, "", "warnings", [&](const json& w, const std::string& at) {
    if (!w.is_string())
      check.fail(at, "a string", w);
  });
}

}  // namespace

json run_summary(const RunRecord& run) {
  const std::string where = fmt::format("--db: the run {}", run.point.key);
  const json summary =
      parse_json(run.metrics.summary_json,
                 JsonInput{where, "a run summary", traces::k_max_json_document_bytes});
  check_run_summary(summary, DocumentCheck(where));
  return summary;
}

json plan_document(const ReportInputs& in) {
  if (in.plan_json.empty())
    return nullptr;
  const json plan = format_document(in.plan_json, in.plan_path, "--plan", "exitsim-plan v1");
  check_plan(plan, DocumentCheck(in.plan_path.empty() ? "--plan" : in.plan_path));
  return plan;
}

json validation_document(const ReportInputs& in) {
  if (in.validation_json.empty())
    return nullptr;
  const json v = format_document(in.validation_json, in.validation_path, "--validation",
                                 "exitsim-validation v1");
  check_validation(v,
                   DocumentCheck(in.validation_path.empty() ? "--validation" : in.validation_path));
  return v;
}

double number_or(const json& object, const char* field, double fallback) {
  const auto it = object.find(field);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace exitsim::analysis::report_parts
