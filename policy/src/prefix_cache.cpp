#include "exitsim/policy/prefix_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "exitsim/core/random.hpp"

namespace exitsim::policy {
namespace {

std::uint64_t chain(std::uint64_t previous, std::uint64_t next) {
  return splitmix64(previous ^ splitmix64(next));
}

}  // namespace

std::vector<BlockHash> scheduler_block_hashes(std::span<const std::uint64_t> source_hashes,
                                              std::int64_t source_block_tokens,
                                              std::int64_t prompt_tokens, std::int64_t block_size) {
  std::vector<BlockHash> hashes;
  if (source_block_tokens <= 0 || block_size <= 0)
    return hashes;
  const auto whole = std::min<std::int64_t>(static_cast<std::int64_t>(source_hashes.size()),
                                            prompt_tokens / source_block_tokens);
  const std::int64_t covered = whole * source_block_tokens;
  // Chained source hashes: prefix[j] names source blocks 0..j.
  std::vector<std::uint64_t> prefix(static_cast<std::size_t>(whole));
  std::uint64_t running = 0;
  for (std::int64_t j = 0; j < whole; ++j) {
    running = chain(running, source_hashes[static_cast<std::size_t>(j)]);
    prefix[static_cast<std::size_t>(j)] = running;
  }
  for (std::int64_t end = block_size; end <= covered; end += block_size) {
    const std::int64_t source = (end - 1) / source_block_tokens;  // the block `end` ends in
    hashes.push_back(
        chain(prefix[static_cast<std::size_t>(source)], static_cast<std::uint64_t>(end)));
  }
  return hashes;
}

PrefixCache::Match PrefixCache::match(std::span<const BlockHash> hashes) const {
  Match m;
  for (const BlockHash hash : hashes) {
    const std::uint32_t* at = index_.find(hash);
    if (at == nullptr)
      break;
    ++m.blocks;
    m.unreferenced += entries_[*at].references == 0 ? 1U : 0U;
  }
  return m;
}

std::size_t PrefixCache::acquire(std::span<const BlockHash> hashes, std::size_t blocks) {
  std::size_t taken = 0;
  for (std::size_t i = 0; i < blocks; ++i)
    taken += acquire(hashes[i]) ? 1U : 0U;
  return taken;
}

PrefixCache::Entry& PrefixCache::entry_of(BlockHash hash, const char* caller) {
  const std::uint32_t* at = index_.find(hash);
  if (at == nullptr)
    throw std::logic_error(std::string("PrefixCache::") + caller + ": block not cached");
  return entries_[*at];
}

void PrefixCache::lru_push_newest(std::uint32_t number) {
  Entry& entry = entries_[number];
  entry.older = lru_newest_;
  entry.newer = k_none;
  if (lru_newest_ != k_none)
    entries_[lru_newest_].newer = number;
  else
    lru_oldest_ = number;
  lru_newest_ = number;
  ++lru_size_;
}

void PrefixCache::lru_unlink(std::uint32_t number) {
  Entry& entry = entries_[number];
  (entry.older != k_none ? entries_[entry.older].newer : lru_oldest_) = entry.newer;
  (entry.newer != k_none ? entries_[entry.newer].older : lru_newest_) = entry.older;
  entry.older = k_none;
  entry.newer = k_none;
  --lru_size_;
}

bool PrefixCache::acquire(BlockHash hash) {
  Entry& entry = entry_of(hash, "acquire");
  if (entry.references++ > 0) {
    sharing_version_ += entry.references == 2 ? 1 : 0;
    return false;
  }
  lru_unlink(static_cast<std::uint32_t>(&entry - entries_.data()));
  ++holding_version_;
  return true;
}

bool PrefixCache::insert(BlockHash hash) {
  if (index_.find(hash) != nullptr)
    return false;
  std::uint32_t number = 0;
  if (free_entries_.empty()) {
    number = static_cast<std::uint32_t>(entries_.size());
    if (number == k_none)
      throw std::length_error("PrefixCache: more than 2^32 - 1 cached blocks");
    entries_.emplace_back();
  } else {
    number = free_entries_.back();
    free_entries_.pop_back();
  }
  entries_[number] = Entry{hash, 1, k_none, k_none};
  index_.insert(hash, number);
  ++version_;
  ++holding_version_;
  return true;
}

std::size_t PrefixCache::release(std::span<const BlockHash> hashes, std::size_t blocks) {
  std::size_t freed = 0;
  for (std::size_t i = blocks; i-- > 0;) {
    const std::uint32_t* at = index_.find(hashes[i]);
    if (at == nullptr || entries_[*at].references == 0)
      throw std::logic_error("PrefixCache::release: block not referenced");
    const std::uint32_t number = *at;
    Entry& entry = entries_[number];
    sharing_version_ += entry.references == 2 ? 1 : 0;
    if (--entry.references == 0) {
      lru_push_newest(number);
      ++holding_version_;
      ++freed;
    }
  }
  return freed;
}

std::size_t PrefixCache::evict(std::size_t blocks) {
  std::size_t evicted = 0;
  while (evicted < blocks && lru_oldest_ != k_none) {
    const std::uint32_t number = lru_oldest_;
    lru_unlink(number);
    index_.erase(entries_[number].hash);
    free_entries_.push_back(number);
    ++evicted;
  }
  if (evicted > 0)
    ++version_;
  return evicted;
}

std::size_t PrefixCache::evict(std::size_t blocks, std::vector<BlockHash>& evicted) {
  // evict() forgets the oldest of the list first: these blocks, in this order.
  std::uint32_t number = lru_oldest_;
  for (std::size_t k = 0; k < blocks && number != k_none; ++k) {
    evicted.push_back(entries_[number].hash);
    number = entries_[number].newer;
  }
  return evict(blocks);
}

std::vector<BlockHash> PrefixCache::eviction_order() const {
  std::vector<BlockHash> order;
  order.reserve(lru_size_);
  for (std::uint32_t number = lru_oldest_; number != k_none; number = entries_[number].newer)
    order.push_back(entries_[number].hash);
  return order;
}

}  // namespace exitsim::policy
