#pragma once
// Serving-benchmark results made from a simulation with known settings: what a vLLM benchmark of
// a deployment that prices like `truth` would have written (the oracle of calibrate --against's
// tests).

#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/scenario/scenario.hpp"

namespace exitsim::test_support {

struct RequestLengths {
  std::int64_t input = 0, output = 0;
};

// `n` requests' lengths from a fixed 64-bit generator (the same on every platform): prompts of
// 64-2047 tokens, outputs of 16-255.
std::vector<RequestLengths> request_lengths(int n, std::uint64_t seed);

// The text of `vllm bench serve --save-result --save-detailed`'s result for `lengths` sent at
// `rate` req/s with gamma gaps of shape `burstiness` (1: Poisson; +infinity: even gaps, written
// as Python's Infinity) and served by `truth`: the send times are vLLM's draw under
// `arrival_seed` (analysis::benchmark_arrivals), the TTFT and every inter-token gap the
// simulator's (each token at the end of the step that emitted it), the duration the last token's
// time.
std::string simulated_vllm_result(const scenario::Scenario& truth,
                                  const std::vector<RequestLengths>& lengths, double rate,
                                  double burstiness, std::uint64_t arrival_seed);

}  // namespace exitsim::test_support
