// Reading serving-benchmark results (exitsim/traces/serving_benchmark.hpp): the checks every
// format's reader makes of a JSON value, each failure one InputError naming the file, the JSON
// Lines line where there is one, and the key path within the run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exitsim/core/time.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::traces::benchmark_json {

using nlohmann::json;

inline constexpr std::size_t k_max_failure_bytes = 60;  // of a request's error text kept
// A gap or TTFT beyond a day is no serving benchmark, nor is a request that streams for longer
// (its TTFT plus its gaps): the bound on the whole request keeps its sums, in nanoseconds, far
// from overflow however many gaps it has.
inline constexpr double k_max_seconds = 86400.0;
inline constexpr TimeNs k_max_request_ns = static_cast<TimeNs>(k_max_seconds) * k_ns_per_s;

// A send time recorded as epoch seconds or ns is at most this (the year 2096): any two of them
// are then less than k_max_arrival_ns (2^62 ns) apart, as the simulator's arrivals must be.
inline constexpr double k_max_epoch_seconds = 4e9;

// Where values are read: a file, its JSON Lines line (0: one document) and the key path of the
// object being read ("benchmarks[2]."), which every named key is appended to.
class JsonPlace {
 public:
  JsonPlace(std::string path, std::int64_t line, std::string prefix = "")
      : path_(std::move(path)), line_(line), prefix_(std::move(prefix)) {}

  // The place of the object under `key` ("requests" -> "benchmarks[2].requests.").
  JsonPlace nested(const std::string& key) const;
  const std::string& path() const { return path_; }
  std::int64_t line() const { return line_; }
  std::string key_path(const std::string& key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const;

  // object[key], refused as "found none" when absent.
  const json& required(const json& object, const std::string& key,
                       const std::string& expected) const;
  // object[key]; null when absent or JSON null.
  const json* optional(const json& object, const std::string& key) const;
  // object[key] as an object (refused when absent or of another type).
  const json& object(const json& object, const std::string& key) const;
  // A string, "" when absent or null.
  std::string text(const json& object, const std::string& key) const;
  // A finite number (not a bool, not "nan").
  double number(const json& value, const std::string& key, const std::string& expected) const;
  // An integer token count in [least, 2^31].
  std::int64_t count(const json& value, const std::string& key, std::int64_t least) const;
  // A time in [0, a day] given in seconds or milliseconds, in ns.
  TimeNs seconds(const json& value, const std::string& key, const std::string& expected) const;
  TimeNs milliseconds(const json& value, const std::string& key, const std::string& expected) const;

 private:
  std::string path_;
  std::int64_t line_;
  std::string prefix_;
};

// A failed request's reason from its error text, at most k_max_failure_bytes of it.
std::string failure_of(const std::string& error);

// Marks a request failed that has no output token or no timed first token (when not failed
// already), and refuses one whose TTFT plus decode time passes a day (`key`: its time's key).
void check_request(BenchmarkRequest& request, const JsonPlace& place, const std::string& key);

// Refuses a run without a successful request (`n`: its requests).
void require_a_success(const ServingBenchmark& run, const JsonPlace& place);

// Each format's reader. `root`: the parsed document (or line).
// One vLLM or SGLang run: the document, or JSON Lines' `line` (0: the file is one document).
ServingBenchmark read_vllm_sglang_run(const json& root, const std::string& path, std::int64_t line);
bool is_guidellm(const json& root);
std::vector<ServingBenchmark> read_guidellm_runs(const json& root, const std::string& path);
bool is_aiperf_record(const json& root);
bool is_aiperf_summary(const json& root);
// AIPerf's profile_export.jsonl: `records` with their lines (0: the file is one record).
ServingBenchmark read_aiperf_records(const std::vector<std::pair<std::int64_t, json>>& records,
                                     const std::string& path);
ServingBenchmark read_aiperf_summary(const json& root, const std::string& path);

}  // namespace exitsim::traces::benchmark_json
