// `validate --against --prefix-cache warm`: which of a benchmark's requests repeat an earlier
// prompt, told from the sequence of their input lengths (benchmark_validation.hpp).
#include <fmt/format.h>

#include "exitsim/analysis/benchmark_validation.hpp"

namespace exitsim::analysis {

PromptRepetition recognise_prompt_repetition(const traces::ServingBenchmark& benchmark) {
  const std::vector<traces::BenchmarkRequest>& r = benchmark.requests;
  const std::size_t n = r.size();
  PromptRepetition out;
  out.first_sent.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    out.first_sent[i] = i;
  // The smallest period p of the lengths (length[i] = length[i - p] for every i >= p) is n minus
  // the longest proper prefix that is also a suffix (the prefix function's last value, O(n)).
  std::vector<std::size_t> border(n, 0);
  for (std::size_t i = 1; i < n; ++i) {
    std::size_t k = border[i - 1];
    while (k > 0 && r[i].input_tokens != r[k].input_tokens)
      k = border[k - 1];
    border[i] = k + (r[i].input_tokens == r[k].input_tokens ? 1 : 0);
  }
  const std::size_t period = n == 0 ? 0 : n - border[n - 1];
  if (period == 0 || period == n) {
    out.description = fmt::format(
        "prompt repetition: none recognised: the {} requests' input lengths do not repeat with "
        "a period; every prompt is replayed as computed",
        n);
    return out;
  }
  if (period == 1) {
    out.description = fmt::format(
        "prompt repetition: none recognised: every prompt has {} tokens, so lengths cannot tell "
        "repeated prompts from different ones; every prompt is replayed as computed",
        r[0].input_tokens);
    return out;
  }
  out.period = static_cast<std::int64_t>(period);
  for (std::size_t i = period; i < n; ++i)
    out.first_sent[i] = i % period;
  out.repeats = static_cast<std::int64_t>(n - period);
  out.description = fmt::format(
      "prompt repetition: the {} requests' input lengths repeat with period {}: requests {}-{} "
      "taken as repeats of requests {}-{} (request i repeats request i mod {}, counting from 0; "
      "{} repeats), replayed with prefix caching on; the first {} are computed (a cache warm "
      "from before the run is not modelled)",
      n, period, period + 1, n, 1, period, period, out.repeats, period);
  return out;
}

}  // namespace exitsim::analysis
