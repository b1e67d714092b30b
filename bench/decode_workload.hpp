#pragma once
// What the CPU and GPU engine benchmarks decode: `batch` requests of short prompts, every prompt
// prefilled in the first iteration, so that the rest of the run is decode; and how a run's
// decode share is measured.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "exitsim/engine/engine.hpp"

namespace exitsim::bench {

inline std::vector<engine::EngineRequest> decode_requests(int batch, std::int64_t prompt,
                                                          std::int64_t output) {
  std::vector<engine::EngineRequest> out;
  for (int i = 0; i < batch; ++i) {
    engine::EngineRequest r;
    r.id = RequestId(static_cast<std::uint64_t>(i));
    for (std::int64_t t = 0; t < prompt; ++t)
      r.prompt.push_back(static_cast<std::int32_t>((31 * t + 7 * i) % 4096));
    r.output_tokens = output;
    out.push_back(r);
  }
  return out;
}

// A strategy at batch size `batch`, with per-token exits 0.5 / 0.3 / 0.2 when `exits`.
inline engine::EngineOptions decode_options(const std::string& strategy, bool exits, int batch) {
  engine::EngineOptions options;
  options.strategy = *policy::parse_sync_strategy(strategy);
  if (exits) {
    options.exit_policy.kind = "distribution";
    options.exit_policy.probabilities = {0.5, 0.3, 0.2};
  }
  options.limits.max_running = batch;
  options.block_size = 16;
  options.kv_blocks = batch * 4;
  return options;
}

struct DecodeShare {
  double tokens = 0;
  double seconds = 0;
};

// From the last first token to the end of the run: decode only.
inline DecodeShare decode_share(const engine::EngineRun& run, int batch) {
  TimeNs first = 0;
  for (const engine::GeneratedToken& t : run.tokens) {
    if (t.position == 0)
      first = std::max(first, t.time);
  }
  return {static_cast<double>(run.tokens.size()) - batch,
          static_cast<double>(run.wall - first) / 1e9};
}

}  // namespace exitsim::bench
