#include "timeline.hpp"

#include <fmt/format.h>

namespace exitsim::sim {

IterationTimeline::IterationTimeline(const std::string& path, double max_mb, int replicas)
    : writer_(path, {static_cast<std::int64_t>(max_mb * 1024 * 1024)}) {
  for (int r = 0; r < replicas; ++r) {
    const std::string process = fmt::format("replica {}", r);
    iteration_tracks_.push_back(writer_.track(process, "iterations"));
    counter_tracks_.push_back(writer_.track(process, "counters"));
  }
}

void IterationTimeline::record(const IterationRecord& iteration) {
  const auto r = static_cast<std::size_t>(iteration.replica);
  const char* name = iteration.prefill_tokens == 0  ? "decode"
                     : iteration.decode_tokens == 0 ? "prefill"
                                                    : "mixed";
  writer_.complete(iteration_tracks_[r], name, iteration.start, iteration.duration,
                   {{"sequences", iteration.sequences},
                    {"prefill_tokens", iteration.prefill_tokens},
                    {"decode_tokens", iteration.decode_tokens}},
                   "iteration");
  writer_.counter(counter_tracks_[r], "batch", iteration.start,
                  {{"sequences", iteration.sequences}});
  writer_.counter(counter_tracks_[r], "kv_blocks", iteration.start,
                  {{"used", iteration.kv_blocks_used}});
}

}  // namespace exitsim::sim
