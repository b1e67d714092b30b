// vLLM and SGLang serving-benchmark results (exitsim/traces/serving_benchmark.hpp). The fields
// and units are those of vllm-project/vllm vllm/benchmarks/serve.py (`vllm bench serve`; the
// older benchmarks/benchmark_serving.py writes the same keys) and of sgl-project/sglang
// python/sglang/bench_serving.py: per-request input_lens, output_lens, ttfts (seconds), itls (a
// list of lists of seconds) and errors; duration in seconds; request_rate a number or "inf".
#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exitsim/core/error.hpp"
#include "exitsim/core/input_file.hpp"
#include "exitsim/core/request.hpp"
#include "exitsim/traces/json_document.hpp"
#include "exitsim/traces/serving_benchmark.hpp"

namespace exitsim::traces {
namespace {

using nlohmann::json;

constexpr std::size_t k_max_failure_bytes = 60;  // of a request's error text kept
// A gap or TTFT beyond a day is no serving benchmark, nor is a request that streams for longer
// (its TTFT plus its gaps): the bound on the whole request keeps its sums, in nanoseconds, far
// from overflow however many gaps it has.
constexpr double k_max_seconds = 86400.0;
constexpr TimeNs k_max_request_ns = static_cast<TimeNs>(k_max_seconds) * k_ns_per_s;

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

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  ServingBenchmark read() {
    const std::string text =
        read_text_file(path_, k_max_json_document_bytes, "serving benchmark result");
    ServingBenchmark b;
    b.path = path_;
    b.lines = 1;
    const json root = document(text, b);
    if (!root.is_object())
      fail("", "a JSON object of a vLLM or SGLang benchmark result", json_shown(root));
    b.format = detect(root);
    refuse_summary_only(root);
    b.backend = text_of(root, "backend");
    b.model_id = text_of(root, "model_id");
    b.tokenizer_id = text_of(root, "tokenizer_id");
    b.date = text_of(root, "date");
    traffic(root, b);
    requests(root, b);
    for (const auto& [key, value] : root.items()) {
      if (value.is_number() && (key.ends_with("_ms") || key.ends_with("throughput")))
        b.summary[key] = value.get<double>();
    }
    return b;
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const std::string& found) const {
    throw InputError(SourceLocation{path_, line_, 0, key}, expected_found(expected, found));
  }

  // The whole file as one JSON document, else (JSON Lines) its last non-empty line.
  json document(const std::string& text, ServingBenchmark& b) {
    const std::string what = "a vLLM result (one JSON object) or SGLang JSON Lines";
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      fail("", what, "an empty file");
    const std::string cleaned = without_python_constants(text);
    if (json::accept(cleaned))
      return parse_json_document(cleaned, path_, what);
    std::istringstream stream(cleaned);
    std::string line;
    std::int64_t number = 0;
    std::int64_t last = 0;
    std::string last_text;
    std::int64_t non_empty = 0;
    while (std::getline(stream, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      ++non_empty;
      last = number;
      last_text = line;
    }
    if (non_empty < 2)  // one line that is not JSON: the whole file's error
      return parse_json_document(cleaned, path_, what);
    b.line = last;
    b.lines = non_empty;
    line_ = last;
    try {
      return parse_json_document(last_text, path_, "a JSON object (the last line of JSON Lines)");
    } catch (const InputError& e) {  // the line it is on
      throw InputError(SourceLocation{path_, line_, 0, ""}, e.message());
    }
  }

  ServingBenchmarkFormat detect(const json& root) const {
    if (root.contains("model_id") || root.contains("burstiness"))
      return ServingBenchmarkFormat::vllm;
    if (root.contains("server_info") || root.contains("mean_e2e_latency_ms") ||
        root.contains("total_output_tokens_retokenized"))
      return ServingBenchmarkFormat::sglang;
    fail("", "a vLLM result (with model_id or burstiness) or an SGLang one (with server_info)",
         "neither");
  }

  std::string text_of(const json& root, const char* key) const {
    const auto it = root.find(key);
    if (it == root.end() || it->is_null())
      return "";
    if (!it->is_string())
      fail(key, "a string", json_shown(*it));
    return it->get<std::string>();
  }

  const json& required(const json& root, const std::string& key, const std::string& expected) {
    const auto it = root.find(key);
    if (it == root.end())
      fail(key, expected, "none");
    return *it;
  }

  // A finite number (not a bool, not "nan").
  double number(const json& value, const std::string& key, const std::string& expected) const {
    if (!value.is_number())
      fail(key, expected, json_shown(value));
    const double v = value.get<double>();
    if (!std::isfinite(v))
      fail(key, expected, json_shown(value));
    return v;
  }

  void traffic(const json& root, ServingBenchmark& b) {
    const json& rate = required(root, "request_rate", "a request rate (a number > 0 or \"inf\")");
    if (rate.is_string() && rate.get<std::string>() == "inf") {
      b.request_rate.reset();
    } else if (rate.is_string() && rate.get<std::string>() == "trace") {
      fail("request_rate",
           "a request rate (a number > 0 or \"inf\"); arrivals from a trace's timestamps are not "
           "reconstructed",
           "\"trace\"");
    } else {
      const double r = number(rate, "request_rate", "a request rate (a number > 0 or \"inf\")");
      if (!(r > 0))
        fail("request_rate", "a request rate (a number > 0 or \"inf\")", json_shown(rate));
      b.request_rate = r;
    }
    if (const auto it = root.find("burstiness"); it != root.end() && !it->is_null()) {
      if (it->is_string() && it->get<std::string>() == "inf") {
        b.burstiness = std::numeric_limits<double>::infinity();
      } else {
        const double v = number(*it, "burstiness", "a burstiness > 0 (the gamma shape)");
        if (!(v > 0))
          fail("burstiness", "a burstiness > 0 (the gamma shape)", json_shown(*it));
        b.burstiness = v;
      }
    } else {
      b.burstiness_given = false;
    }
    if (const auto it = root.find("ramp_up_strategy"); it != root.end() && !it->is_null()) {
      fail("ramp_up_strategy",
           "null (a request rate that ramps up is not reconstructed; rerun without "
           "--ramp-up-strategy)",
           json_shown(*it));
    }
    if (const auto it = root.find("max_concurrency"); it != root.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<std::int64_t>() < 1)
        fail("max_concurrency", "null or an integer >= 1", json_shown(*it));
      b.max_concurrency = it->get<std::int64_t>();
    }
    const json& duration = required(root, "duration", "the benchmark's duration in seconds > 0");
    b.duration_s = number(duration, "duration", "the benchmark's duration in seconds > 0");
    if (!(b.duration_s > 0))
      fail("duration", "the benchmark's duration in seconds > 0", json_shown(duration));
  }

  // A result saved without its per-request lists (vLLM's nightly format, `vllm bench serve`
  // without --save-detailed, SGLang without --output-details) carries summary figures only:
  // said as such, before the keys a detailed result has besides (duration) are missed.
  void refuse_summary_only(const json& root) const {
    for (const char* list : {"input_lens", "output_lens", "ttfts", "itls"}) {
      if (root.contains(list))
        return;  // a detailed result; a missing list is named where it is read
    }
    std::string figures;
    for (const char* key : {"mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                            "mean_itl_ms", "mean_e2el_ms", "request_throughput"}) {
      if (root.contains(key))
        figures += (figures.empty() ? "" : ", ") + std::string(key);
    }
    if (figures.empty())
      return;
    fail("input_lens",
         "per-request lists (vllm bench serve --save-result --save-detailed, SGLang's "
         "bench_serving --output-details)",
         fmt::format("a summary-only result ({}): exitsim compares against the requests a "
                     "benchmark sent, which a summary does not list",
                     figures));
  }

  // A list of `n` entries (n = the first list's size when n < 0).
  const json& list(const json& root, const std::string& key, std::int64_t n) {
    const std::string expected =
        "a list of one entry per request (saved with --save-detailed or --output-details)";
    const json& value = required(root, key, expected);
    if (!value.is_array())
      fail(key, expected, json_shown(value));
    if (value.empty())
      fail(key, "a list of at least one request", "[]");
    if (n >= 0 && static_cast<std::int64_t>(value.size()) != n) {
      fail(key, fmt::format("{} entries, as many as input_lens", n),
           fmt::format("{}", value.size()));
    }
    return value;
  }

  std::int64_t count(const json& value, const std::string& key, std::int64_t least) const {
    const std::string expected = fmt::format("an integer token count >= {}", least);
    if (!value.is_number_integer())
      fail(key, expected, json_shown(value));
    const auto v = value.get<std::int64_t>();
    if (v < least || v > k_max_request_tokens)
      fail(key, fmt::format("{} (at most 2^31)", expected), json_shown(value));
    return v;
  }

  TimeNs seconds(const json& value, const std::string& key, const std::string& expected) const {
    const double s = number(value, key, expected);
    if (s < 0 || s > k_max_seconds)
      fail(key, expected, json_shown(value));
    return static_cast<TimeNs>(std::llround(s * 1e9));
  }

  void requests(const json& root, ServingBenchmark& b) {
    const json& inputs = list(root, "input_lens", -1);
    const auto n = static_cast<std::int64_t>(inputs.size());
    const json& outputs = list(root, "output_lens", n);
    const json& ttfts = list(root, "ttfts", n);
    const json& itls = list(root, "itls", n);
    const json* errors = nullptr;
    if (const auto it = root.find("errors"); it != root.end() && !it->is_null()) {
      errors = &list(root, "errors", n);
    }
    std::int64_t successful = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto at = [&](const char* key) { return fmt::format("{}[{}]", key, i); };
      const auto u = static_cast<std::size_t>(i);
      BenchmarkRequest r;
      r.input_tokens = count(inputs[u], at("input_lens"), 1);
      r.output_tokens = count(outputs[u], at("output_lens"), 0);
      r.ttft = seconds(ttfts[u], at("ttfts"), "a time to first token in seconds, >= 0 and finite");
      if (errors) {
        const json& e = (*errors)[u];
        if (!e.is_null() && !e.is_string())
          fail(at("errors"), "a string (empty: no error) or null", json_shown(e));
        if (e.is_string() && !e.get<std::string>().empty()) {
          r.failed = true;
          r.failure = "error: " + e.get<std::string>().substr(0, k_max_failure_bytes);
        }
      }
      if (!r.failed && r.output_tokens == 0) {
        r.failed = true;
        r.failure = "no output token counted";
      }
      if (!r.failed && r.ttft == 0) {
        r.failed = true;
        r.failure = "no first token timed (ttft 0)";
      }
      const json& gaps = itls[u];
      if (!gaps.is_array())
        fail(at("itls"), "a list of numbers (seconds)", json_shown(gaps));
      TimeNs streamed = r.ttft;
      for (std::size_t k = 0; k < gaps.size(); ++k) {
        const std::string key = fmt::format("itls[{}][{}]", i, k);
        r.itls.push_back(
            seconds(gaps[k], key, "an inter-token latency in seconds, >= 0 and finite"));
        streamed += r.itls.back();
        if (streamed > k_max_request_ns) {
          fail(key,
               fmt::format("ttfts[{}] plus itls[{}] of at most {} s (a day)", i, i, k_max_seconds),
               fmt::format("{:.3f} s by this gap", to_seconds(streamed)));
        }
      }
      if (!r.failed && static_cast<std::int64_t>(r.itls.size()) > r.output_tokens - 1) {
        fail(at("itls"),
             fmt::format("at most output_lens[{}] - 1 = {} gaps (one per streamed chunk after "
                         "the first)",
                         i, r.output_tokens - 1),
             fmt::format("{}", r.itls.size()));
      }
      successful += r.failed ? 0 : 1;
      b.requests.push_back(std::move(r));
    }
    if (successful == 0) {
      fail("",
           "at least one successful request to compare (an empty error, an output and a timed "
           "first token)",
           fmt::format("none of {}", n));
    }
  }

  std::string path_;
  std::int64_t line_ = 0;
};

}  // namespace

std::string format_name(ServingBenchmarkFormat format) {
  return format == ServingBenchmarkFormat::vllm ? "vllm" : "sglang";
}

std::int64_t ServingBenchmark::failed_requests() const {
  std::int64_t n = 0;
  for (const BenchmarkRequest& r : requests)
    n += r.failed ? 1 : 0;
  return n;
}

ServingBenchmark read_serving_benchmark(const std::string& path) {
  return Reader(path).read();
}

}  // namespace exitsim::traces
