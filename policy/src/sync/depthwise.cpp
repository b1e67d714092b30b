#include "exitsim/policy/depthwise.hpp"

#include <cassert>
#include <string>

#include "exitsim/core/error.hpp"

namespace exitsim::policy {

void check_depthwise_exit_points(const DepthStructure& depth) {
  for (const int point : depth.effective_exit_points()) {
    const int above = point - depth.prelude_layers;
    if (depth.block_layers <= 0 || above <= 0 || above % depth.block_layers != 0) {
      throw InputError(
          {"", 0, 0, "model.depth.exit_points"},
          expected_found("exit points at ends of recursions (" +
                             std::to_string(depth.prelude_layers) + " prelude + a multiple of " +
                             std::to_string(depth.block_layers) +
                             " block layers) for depthwise batching",
                         std::to_string(point)));
    }
  }
}

void finish_depthwise_step(const DepthwiseRule& rule, std::span<DepthwiseStage> stages,
                           std::span<const std::uint8_t> left_block,
                           std::span<std::uint8_t> runs_head) {
  assert(left_block.size() == stages.size() && runs_head.size() == stages.size());
  std::int64_t waiting = 0;
  std::int64_t in_block = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    DepthwiseStage& stage = stages[i];
    if (!stage.awaiting_head) {
      stage.recursions_done += 1;
      stage.awaiting_head = left_block[i] != 0;
    }
    (stage.awaiting_head ? waiting : in_block) += 1;
  }
  const bool release = rule.exited == ExitedTokens::immediate ||
                       waiting >= rule.accumulate_threshold || in_block == 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const bool runs = release && stages[i].awaiting_head;
    runs_head[i] = runs ? 1 : 0;
    if (runs)
      stages[i] = DepthwiseStage{};
  }
}

}  // namespace exitsim::policy
