// Serving-benchmark results (exitsim/traces/serving_benchmark.hpp): the file split into runs and
// each run's format told. The formats are read in vllm_sglang_reader.cpp, guidellm_reader.cpp
// and aiperf_reader.cpp.
#include "exitsim/traces/serving_benchmark.hpp"

#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "benchmark_json.hpp"
#include "exitsim/core/error.hpp"
#include "exitsim/core/input_file.hpp"
#include "exitsim/traces/json_document.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;

// Python's json.dumps writes float('inf') and float('nan') as the bare tokens Infinity,
// -Infinity and NaN, which JSON does not have: outside strings they become "inf", "-inf" and
// "nan", so that a rate of inf reads and a NaN is refused by name.
std::string without_python_constants(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    const std::string_view rest(text.data() + i, text.size() - i);
    if (rest.starts_with("-Infinity")) {
      out += "\"-inf\"";
      i += 8;
    } else if (rest.starts_with("Infinity")) {
      out += "\"inf\"";
      i += 7;
    } else if (rest.starts_with("NaN")) {
      out += "\"nan\"";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}
// The non-empty lines of JSON Lines text, with their 1-based numbers.
std::vector<std::pair<std::int64_t, std::string>> non_empty_lines(const std::string& text) {
  std::vector<std::pair<std::int64_t, std::string>> lines;
  std::istringstream stream(text);
  std::string line;
  std::int64_t number = 0;
  while (std::getline(stream, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      lines.emplace_back(number, std::move(line));
  }
  return lines;
}

json parse_line(const std::string& path, std::int64_t number, const std::string& text) {
  try {
    return parse_json_document(text, path, "a JSON object (a line of JSON Lines)");
  } catch (const InputError& e) {  // the line it is on
    throw InputError(SourceLocation{path, number, 0, ""}, e.message());
  }
}

std::vector<ServingBenchmark> runs_of_document(const json& root, const std::string& path) {
  if (root.is_object() && benchmark_json::is_guidellm(root))
    return benchmark_json::read_guidellm_runs(root, path);
  if (root.is_object() && benchmark_json::is_aiperf_record(root))
    return {benchmark_json::read_aiperf_records({{0, root}}, path)};
  if (root.is_object() && benchmark_json::is_aiperf_summary(root))
    return {benchmark_json::read_aiperf_summary(root, path)};
  return {benchmark_json::read_vllm_sglang_run(root, path, 0)};
}

}  // namespace

std::string format_name(ServingBenchmarkFormat format) {
  switch (format) {
    case ServingBenchmarkFormat::vllm:
      return "vllm";
    case ServingBenchmarkFormat::sglang:
      return "sglang";
    case ServingBenchmarkFormat::guidellm:
      return "guidellm";
    case ServingBenchmarkFormat::aiperf:
      return "aiperf";
  }
  return "unknown";
}

std::int64_t ServingBenchmark::failed_requests() const {
  std::int64_t n = 0;
  for (const BenchmarkRequest& r : requests)
    n += r.failed ? 1 : 0;
  return n;
}

bool ServingBenchmark::arrivals_recorded() const {
  if (requests.empty())
    return false;
  for (const BenchmarkRequest& r : requests) {
    if (!r.failed && !r.sent)
      return false;
  }
  return true;
}

std::vector<ServingBenchmark> read_serving_benchmark_runs(const std::string& path) {
  const std::string text =
      read_text_file(path, k_max_json_document_bytes, "serving benchmark result");
  const std::string what =
      "a benchmark result (one JSON object: vLLM, GuideLLM, AIPerf's summary) or JSON Lines "
      "(SGLang, AIPerf's records)";
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(SourceLocation{path, 0, 0, ""}, expected_found(what, "an empty file"));
  const std::string cleaned = without_python_constants(text);
  const auto lines = non_empty_lines(cleaned);
  // JSON Lines when the file is no one document but its first line is one: else (one line, or
  // a document broken further on) the error is the whole document's, at its byte.
  if (json::accept(cleaned) || lines.size() < 2 || !json::accept(lines.front().second))
    return runs_of_document(parse_json_document(cleaned, path, what), path);
  const json first = parse_line(path, lines.front().first, lines.front().second);
  if (first.is_object() && benchmark_json::is_aiperf_record(first)) {
    std::vector<std::pair<std::int64_t, json>> records;
    for (const auto& [number, line] : lines)
      records.emplace_back(number, parse_line(path, number, line));
    return {benchmark_json::read_aiperf_records(records, path)};
  }
  std::vector<ServingBenchmark> runs;
  for (const auto& [number, line] : lines) {
    runs.push_back(
        benchmark_json::read_vllm_sglang_run(parse_line(path, number, line), path, number));
    runs.back().run = static_cast<int>(runs.size());
  }
  for (ServingBenchmark& run : runs)
    run.runs = static_cast<int>(runs.size());
  return runs;
}

ServingBenchmark read_serving_benchmark(const std::string& path) {
  return read_serving_benchmark_runs(path).back();
}

}  // namespace exitsim::traces
