#include "exitsim/policy/apply_decision.hpp"

namespace exitsim::policy {

void map_work_to_running(const SchedulerDecision& decision,
                         std::span<const std::size_t> preempted_sorted, std::size_t kept,
                         std::vector<std::int64_t>& work) {
  work.assign(kept + decision.admit.size(), 0);
  for (const ScheduledWork& item : decision.work) {
    std::size_t target = 0;
    if (item.sequence.waiting) {
      const auto position =
          std::find(decision.admit.begin(), decision.admit.end(), item.sequence.index);
      target = kept + static_cast<std::size_t>(position - decision.admit.begin());
    } else {
      // Victims before it left the running set; its own work was dropped if it was one.
      const auto removed_before =
          std::lower_bound(preempted_sorted.begin(), preempted_sorted.end(), item.sequence.index);
      target =
          item.sequence.index - static_cast<std::size_t>(removed_before - preempted_sorted.begin());
    }
    work[target] = item.tokens;
  }
}

std::optional<std::size_t> waiting_kv_holder_to_release(const SchedulerSnapshot& snapshot) {
  for (std::size_t i = snapshot.waiting.size(); i-- > 0;) {
    if (snapshot.waiting[i].kv_blocks > 0)
      return i;
  }
  return std::nullopt;
}

}  // namespace exitsim::policy
