#include "exitsim/policy/block_hash_index.hpp"

#include <stdexcept>

namespace exitsim::policy {

void BlockHashIndex::insert(std::uint64_t key, std::uint32_t value) {
  if (value == k_none)
    throw std::logic_error("BlockHashIndex::insert: the empty mark is not a value");
  if (2 * (size_ + 1) > slots_.size())
    grow();
  std::size_t i = home(key);
  while (slots_[i].value != k_none)
    i = (i + 1) & mask();
  slots_[i] = {key, value};
  ++size_;
}

bool BlockHashIndex::erase(std::uint64_t key) {
  if (slots_.empty())
    return false;
  std::size_t hole = home(key);
  while (slots_[hole].key != key || slots_[hole].value == k_none) {
    if (slots_[hole].value == k_none)
      return false;
    hole = (hole + 1) & mask();
  }
  // Shift back each following entry whose probe run passes over the hole.
  for (std::size_t next = (hole + 1) & mask(); slots_[next].value != k_none;
       next = (next + 1) & mask()) {
    const std::size_t want = home(slots_[next].key);
    const bool passes_hole =
        hole <= next ? (want <= hole || want > next) : (want <= hole && want > next);
    if (passes_hole) {
      slots_[hole] = slots_[next];
      hole = next;
    }
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

void BlockHashIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = old.empty() ? 64 : 2 * old.size();
  slots_.assign(capacity, Slot{});
  shift_ = 64;
  for (std::size_t c = capacity; c > 1; c >>= 1)
    --shift_;
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.value != k_none)
      insert(slot.key, slot.value);
  }
}

}  // namespace exitsim::policy
