#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace exitsim::policy {

// A map from 64-bit block hashes to 32-bit slots, open addressing with linear probing (at most
// half full; erasing shifts the entries after it back, so no tombstones). Prefix caching looks a
// block up for every block a prompt computes, references, releases or evicts: millions per
// replay, where a node-based map's allocation and pointer chasing dominated.
class BlockHashIndex {
 public:
  static constexpr std::uint32_t k_none = ~std::uint32_t{0};

  // The slot stored for `key`; null when absent. Valid until the next insert or erase.
  std::uint32_t* find(std::uint64_t key) {
    if (slots_.empty())
      return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      Slot& slot = slots_[i];
      if (slot.value == k_none)
        return nullptr;
      if (slot.key == key)
        return &slot.value;
    }
  }
  const std::uint32_t* find(std::uint64_t key) const {
    return const_cast<BlockHashIndex*>(this)->find(key);
  }
  // Stores `key` -> `value` (not k_none) for an absent key.
  void insert(std::uint64_t key, std::uint32_t value);
  // Removes `key`; false when absent.
  bool erase(std::uint64_t key);
  std::size_t size() const { return size_; }
  // Calls f(key, value&) for every entry, in table order.
  template <class F>
  void for_each(F&& f) {
    for (Slot& slot : slots_) {
      if (slot.value != k_none)
        f(slot.key, slot.value);
    }
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t value = k_none;  // k_none: empty
  };
  std::size_t mask() const { return slots_.size() - 1; }
  // Fibonacci hashing: spreads small test keys as well as chained hashes.
  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  unsigned shift_ = 64;
};

}  // namespace exitsim::policy
