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
  constexpr std::uint64_t position_mask = (std::uint64_t{1} << k_block_position_bits) - 1;
  hashes.reserve(static_cast<std::size_t>(covered / block_size));
  // Walk the source blocks and the scheduler blocks ending in each (no division per block).
  std::int64_t end = block_size;
  for (std::int64_t source = 0; source < whole; ++source) {
    const std::int64_t source_end = (source + 1) * source_block_tokens;
    // `place`: the block's place among those ending in this source block, a run number (its
    // name chained once per run) and a position.
    std::uint64_t run = 0;
    for (std::uint64_t place = 0; end <= source_end; end += block_size, ++place) {
      if ((place & position_mask) == 0) {
        run = chain(prefix[static_cast<std::size_t>(source)], place >> k_block_position_bits) &
              ~position_mask;
      }
      hashes.push_back(run | (place & position_mask));
    }
  }
  return hashes;
}

std::uint32_t PrefixCache::group_of(BlockHash key) const {
  if (last_group_ != k_none && last_key_ == key)
    return last_group_;
  const std::uint32_t* at = index_.find(key);
  if (at == nullptr)
    return k_none;
  last_key_ = key;
  last_group_ = *at;
  return *at;
}

std::uint32_t PrefixCache::find(BlockHash hash) const {
  const std::uint32_t group = group_of(hash & ~k_position_mask);
  if (group == k_none)
    return k_none;
  const std::uint32_t number = (group << k_block_position_bits) | (hash & k_position_mask);
  return entries_[number].references == k_absent ? k_none : number;
}

std::uint32_t PrefixCache::open_group(BlockHash key) {
  std::uint32_t group = 0;
  if (free_groups_.empty()) {
    group = static_cast<std::uint32_t>(groups_.size());
    if (group >= (k_none >> k_block_position_bits))
      throw std::length_error("PrefixCache: too many cached blocks");
    groups_.emplace_back();
    entries_.resize(entries_.size() + k_group_size);
  } else {
    group = free_groups_.back();
    free_groups_.pop_back();
  }
  groups_[group] = Group{key, 0};
  index_.insert(key, group);
  last_key_ = key;
  last_group_ = group;
  return group;
}

PrefixCache::Match PrefixCache::match(std::span<const BlockHash> hashes) const {
  Match m;
  for (const BlockHash hash : hashes) {
    const std::uint32_t number = find(hash);
    if (number == k_none)
      break;
    ++m.blocks;
    m.unreferenced += entries_[number].references == 0 ? 1U : 0U;
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
  const std::uint32_t number = find(hash);
  if (number == k_none)
    throw std::logic_error(std::string("PrefixCache::") + caller + ": block not cached");
  return entries_[number];
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
  const BlockHash key = hash & ~k_position_mask;
  std::uint32_t group = group_of(key);
  if (group == k_none)
    group = open_group(key);
  Entry& entry = entries_[(group << k_block_position_bits) | (hash & k_position_mask)];
  if (entry.references != k_absent)
    return false;
  entry = Entry{1, k_none, k_none};
  ++groups_[group].cached;
  ++cached_;
  ++version_;
  ++holding_version_;
  return true;
}

std::size_t PrefixCache::release(std::span<const BlockHash> hashes, std::size_t blocks) {
  std::size_t freed = 0;
  for (std::size_t i = blocks; i-- > 0;) {
    const std::uint32_t number = find(hashes[i]);
    if (number == k_none || entries_[number].references == 0)
      throw std::logic_error("PrefixCache::release: block not referenced");
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
    entries_[number].references = k_absent;
    --cached_;
    const std::uint32_t group = number >> k_block_position_bits;
    if (--groups_[group].cached == 0) {
      index_.erase(groups_[group].key);
      free_groups_.push_back(group);
      if (last_group_ == group)
        last_group_ = k_none;
    }
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
    evicted.push_back(hash_of(number));
    number = entries_[number].newer;
  }
  return evict(blocks);
}

std::vector<BlockHash> PrefixCache::eviction_order() const {
  std::vector<BlockHash> order;
  order.reserve(lru_size_);
  for (std::uint32_t number = lru_oldest_; number != k_none; number = entries_[number].newer)
    order.push_back(hash_of(number));
  return order;
}

}  // namespace exitsim::policy
