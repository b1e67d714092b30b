#include "exitsim/policy/prefix_cache.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

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
    const auto it = entries_.find(hash);
    if (it == entries_.end())
      break;
    ++m.blocks;
    m.unreferenced += it->second.references == 0 ? 1U : 0U;
  }
  return m;
}

std::size_t PrefixCache::acquire(std::span<const BlockHash> hashes, std::size_t blocks) {
  std::size_t taken = 0;
  for (std::size_t i = 0; i < blocks; ++i)
    taken += acquire(hashes[i]) ? 1U : 0U;
  return taken;
}

bool PrefixCache::acquire(BlockHash hash) {
  const auto it = entries_.find(hash);
  if (it == entries_.end())
    throw std::logic_error("PrefixCache::acquire: block not cached");
  Entry& entry = it->second;
  if (entry.references++ > 0) {
    sharing_version_ += entry.references == 2 ? 1 : 0;
    return false;
  }
  lru_.erase(entry.in_lru);
  ++holding_version_;
  return true;
}

bool PrefixCache::insert(BlockHash hash) {
  const auto [it, inserted] = entries_.try_emplace(hash);
  if (!inserted)
    return false;
  it->second.references = 1;
  ++version_;
  ++holding_version_;
  return true;
}

std::size_t PrefixCache::release(std::span<const BlockHash> hashes, std::size_t blocks) {
  std::size_t freed = 0;
  for (std::size_t i = blocks; i-- > 0;) {
    const auto it = entries_.find(hashes[i]);
    if (it == entries_.end() || it->second.references == 0)
      throw std::logic_error("PrefixCache::release: block not referenced");
    Entry& entry = it->second;
    sharing_version_ += entry.references == 2 ? 1 : 0;
    if (--entry.references == 0) {
      entry.in_lru = lru_.insert(lru_.end(), hashes[i]);
      ++holding_version_;
      ++freed;
    }
  }
  return freed;
}

std::size_t PrefixCache::evict(std::size_t blocks) {
  std::size_t evicted = 0;
  while (evicted < blocks && !lru_.empty()) {
    entries_.erase(lru_.front());
    lru_.pop_front();
    ++evicted;
  }
  if (evicted > 0)
    ++version_;
  return evicted;
}

std::size_t PrefixCache::evict(std::size_t blocks, std::vector<BlockHash>& evicted) {
  // evict() takes the LRU list's front: these are the blocks it forgets, in its order.
  const auto count = static_cast<std::ptrdiff_t>(std::min(blocks, lru_.size()));
  evicted.insert(evicted.end(), lru_.begin(), std::next(lru_.begin(), count));
  return evict(blocks);
}

}  // namespace exitsim::policy
