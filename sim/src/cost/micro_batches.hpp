#pragma once
// A pipeline-parallel batch's micro-batches, as every cost model forms them (docs/cost_model.md,
// "Pipeline parallelism"): the one rule the roofline and the measured models share.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exitsim/core/parallel.hpp"
#include "exitsim/sim/cost/cost_model.hpp"

namespace exitsim::sim {

// vLLM's virtual engines: the entries with query tokens split into m = min(stages, such entries)
// micro-batches, each entry joining the one with the fewest tokens so far (the first of them on
// a tie). Allocation-free once its vectors have grown.
struct MicroBatches {
  std::vector<BatchEntry> grouped;   // entries by micro-batch, in batch order within each
  std::vector<std::size_t> begin;    // micro-batch m is grouped[begin[m], begin[m + 1])
  std::vector<std::int64_t> tokens;  // query tokens of each micro-batch
  std::vector<std::size_t> owner;    // scratch: each entry's micro-batch (m: none)

  std::size_t count() const { return tokens.size(); }
  std::span<const BatchEntry> part(std::size_t m) const {
    return {grouped.data() + begin[m], begin[m + 1] - begin[m]};
  }

  // Regroups `batch` for `stages` (at most k_max_pipeline_stages) stages.
  void split(std::span<const BatchEntry> batch, std::size_t stages) {
    std::size_t active = 0;
    for (const BatchEntry& e : batch)
      active += e.query_tokens > 0 ? 1 : 0;
    const std::size_t micro = std::min(stages, active);
    owner.assign(batch.size(), micro);
    tokens.assign(micro, 0);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].query_tokens <= 0 || micro == 0)
        continue;
      const auto lightest =
          static_cast<std::size_t>(std::min_element(tokens.begin(), tokens.end()) - tokens.begin());
      owner[i] = lightest;
      tokens[lightest] += batch[i].query_tokens;
    }
    begin.assign(micro + 1, 0);
    for (const std::size_t m : owner) {
      if (m < micro)
        ++begin[m + 1];
    }
    for (std::size_t m = 0; m < micro; ++m)
      begin[m + 1] += begin[m];
    grouped.resize(active);
    std::array<std::size_t, k_max_pipeline_stages> filled{};
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::size_t m = owner[i];
      if (m < micro)
        grouped[begin[m] + filled[m]++] = batch[i];
    }
  }
};

}  // namespace exitsim::sim
