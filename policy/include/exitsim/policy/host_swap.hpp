#pragma once

#include <cstdint>

namespace exitsim::policy {

// Swap preemption's host tier (scheduler.preemption: swap), counted in pool blocks as the
// scheduler charges them (SequenceView::kv_blocks). A victim whose blocks fit moves there and
// keeps its computed tokens; one that does not is recomputed, as vLLM does when its CPU swap
// space is full. The engine and the simulator both decide through it, so they swap and
// recompute the same victims.
class HostSwapSpace {
 public:
  explicit HostSwapSpace(std::int64_t capacity_blocks)
      : capacity_(capacity_blocks), free_(capacity_blocks) {}

  // Takes room for a victim's blocks; false, taking nothing, when they do not fit.
  bool take(std::int64_t blocks) {
    if (blocks > free_)
      return false;
    free_ -= blocks;
    return true;
  }
  // A swapped sequence came back to the device.
  void give_back(std::int64_t blocks) { free_ += blocks; }

  std::int64_t capacity() const { return capacity_; }
  std::int64_t free() const { return free_; }

 private:
  std::int64_t capacity_;
  std::int64_t free_;
};

}  // namespace exitsim::policy
