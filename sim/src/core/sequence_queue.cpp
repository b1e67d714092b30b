#include <algorithm>

#include "replica.hpp"

namespace exitsim::sim {

void SequenceQueue::push_back(const policy::SequenceView& view, const SequenceExtra& extra) {
  views_.push_back(view);
  extras_.push_back(extra);
  keys_.push_back(next_back_key_++);
}

void SequenceQueue::push_front(const policy::SequenceView& view, const SequenceExtra& extra) {
  if (head_ > 0) {
    --head_;
    views_[head_] = view;
    extras_[head_] = extra;
    keys_[head_] = next_front_key_--;
    return;
  }
  views_.insert(views_.begin(), view);
  extras_.insert(extras_.begin(), extra);
  keys_.insert(keys_.begin(), next_front_key_--);
}

std::size_t SequenceQueue::find(std::uint64_t key) const {
  const auto live = keys_.begin() + static_cast<std::ptrdiff_t>(head_);
  const auto at = std::lower_bound(live, keys_.end(), key);
  return at != keys_.end() && *at == key ? static_cast<std::size_t>(at - live) : size();
}

void SequenceQueue::remove(std::span<const std::size_t> sorted_indices) {
  if (sorted_indices.empty())
    return;
  // Removing a prefix only moves the head; anything else closes the gaps in one pass.
  bool is_prefix = true;
  for (std::size_t k = 0; k < sorted_indices.size(); ++k)
    is_prefix &= sorted_indices[k] == k;
  if (is_prefix) {
    head_ += sorted_indices.size();
    compact();
    return;
  }
  std::size_t write = head_ + sorted_indices.front();
  std::size_t next_removed = 0;
  for (std::size_t read = write; read < views_.size(); ++read) {
    if (next_removed < sorted_indices.size() && read - head_ == sorted_indices[next_removed]) {
      ++next_removed;
      continue;
    }
    views_[write] = views_[read];
    extras_[write] = extras_[read];
    keys_[write] = keys_[read];
    ++write;
  }
  views_.resize(write);
  extras_.resize(write);
  keys_.resize(write);
  compact();
}

void SequenceQueue::compact() {
  // Reclaim the dead prefix once it outweighs the live part: amortised O(1) per removal.
  if (head_ == views_.size()) {
    views_.clear();
    extras_.clear();
    keys_.clear();
    head_ = 0;
  } else if (head_ > 1024 && head_ * 2 > views_.size()) {
    views_.erase(views_.begin(), views_.begin() + static_cast<std::ptrdiff_t>(head_));
    extras_.erase(extras_.begin(), extras_.begin() + static_cast<std::ptrdiff_t>(head_));
    keys_.erase(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

}  // namespace exitsim::sim
