#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "exitsim/policy/block_hash_index.hpp"

namespace exitsim::policy {

// The identity of one full K/V block of a prompt: a hash chained from the prompt's start, so that
// two prompts share a block exactly when they share every token up to its end (vLLM's automatic
// prefix caching).
using BlockHash = std::uint64_t;

// The hashes of the scheduler's blocks of `block_size` tokens covered by a prompt prefix that a
// trace describes in blocks of `source_block_tokens` tokens (`source_hashes`, one per source
// block, each naming the block's content; Mooncake's hash_ids use 512-token blocks). Only whole
// source blocks within `prompt_tokens` count (a partial block is never reused). A scheduler
// block is shareable when every token up to its end lies in such a source block; its hash chains
// the source hashes up to the source block it ends in with its position there, so it is equal
// for two prompts exactly when their source blocks agree up to there. Deterministic (no seeds).
// The low k_block_position_bits of a hash are the block's position within its source block (in
// runs of 2^k_block_position_bits), the rest name the run: PrefixCache keeps one run's blocks
// together.
inline constexpr unsigned k_block_position_bits = 6;
std::vector<BlockHash> scheduler_block_hashes(std::span<const std::uint64_t> source_hashes,
                                              std::int64_t source_block_tokens,
                                              std::int64_t prompt_tokens, std::int64_t block_size);

// Which full blocks of K/V a replica keeps for reuse, and who references them. Blocks are named by
// their BlockHash; the pool's block count is kept by the executor. A block that no running
// sequence references stays cached and counts as free: it is evicted, least recently released
// first, when the pool needs a fresh block. A sequence releases its blocks last to first, so
// that a prompt's tail (shared by fewer prompts) goes before its head.
class PrefixCache {
 public:
  struct Match {
    std::size_t blocks = 0;        // leading blocks of the prompt the cache holds
    std::size_t unreferenced = 0;  // of those, held by no sequence (they leave the free pool)
  };

  // How many leading `hashes` are cached. Reads only.
  Match match(std::span<const BlockHash> hashes) const;
  // References the first `blocks` of `hashes`, which match() found cached. Returns how many of
  // them nobody referenced before (now out of the free pool).
  std::size_t acquire(std::span<const BlockHash> hashes, std::size_t blocks);
  // References one cached block; true when nobody referenced it before.
  bool acquire(BlockHash hash);
  // Caches a block a sequence has just filled, referenced by it. False when a block of that hash
  // is cached already: the caller references that one instead (acquire) and frees its own.
  bool insert(BlockHash hash);
  // Drops the references to the first `blocks` of `hashes`, last first. Returns how many are now
  // referenced by nobody (back in the free pool, still cached).
  std::size_t release(std::span<const BlockHash> hashes, std::size_t blocks);
  // Forgets up to `blocks` unreferenced blocks, least recently released first, so that the pool
  // can reuse them. Returns how many.
  std::size_t evict(std::size_t blocks);
  // The same, appending the forgotten blocks' hashes to `evicted` (in eviction order), for a
  // caller that keeps answers derived from them.
  std::size_t evict(std::size_t blocks, std::vector<BlockHash>& evicted);

  // A cached block's references; nullopt when it is not cached.
  std::optional<std::uint32_t> references(BlockHash hash) const {
    const std::uint32_t number = find(hash);
    return number == k_none ? std::nullopt
                            : std::optional<std::uint32_t>(entries_[number].references);
  }
  std::size_t cached_blocks() const { return cached_; }
  std::size_t unreferenced_blocks() const { return lru_size_; }
  // Change whenever the answer could: which blocks are cached (insert, evict); which are
  // referenced at all (a count crossing 0 and 1); which are referenced more than once (1 and 2).
  std::uint64_t version() const { return version_; }
  std::uint64_t holding_version() const { return holding_version_; }
  std::uint64_t sharing_version() const { return sharing_version_; }
  // The unreferenced blocks, next to be evicted first (for tests and reports).
  std::vector<BlockHash> eviction_order() const;

 private:
  static constexpr std::uint32_t k_none = BlockHashIndex::k_none;
  static constexpr std::uint32_t k_absent = ~std::uint32_t{0};  // Entry::references: not cached
  static constexpr std::uint32_t k_group_size = 1U << k_block_position_bits;
  static constexpr BlockHash k_position_mask = k_group_size - 1;
  // A block that may be cached: the unreferenced cached ones form a doubly linked list through
  // `older`/`newer` (entry numbers), least recently released first. Entry number g * 64 + p is
  // position p of group g: the blocks whose hashes differ only in their position bits (one
  // source block's run, cached, referenced, released and evicted together mostly) share one
  // index lookup and lie side by side in memory. Under the Mooncake replay (32 blocks per
  // source block) the index was a per-block random access into megabytes, the replay's cost.
  // A trace naming blocks of the scheduler's size (a run of one) pays 64 entries per block.
  struct Entry {
    std::uint32_t references = k_absent;
    std::uint32_t older = k_none;
    std::uint32_t newer = k_none;
  };
  struct Group {
    BlockHash key = 0;  // the hashes' bits above the position
    std::uint32_t cached = 0;
  };
  // The entry number of a cached block; k_none when it is not cached.
  std::uint32_t find(BlockHash hash) const;
  std::uint32_t group_of(BlockHash key) const;
  std::uint32_t open_group(BlockHash key);
  Entry& entry_of(BlockHash hash, const char* caller);
  BlockHash hash_of(std::uint32_t number) const {
    return groups_[number >> k_block_position_bits].key | (number & k_position_mask);
  }
  void lru_push_newest(std::uint32_t entry);
  void lru_unlink(std::uint32_t entry);

  BlockHashIndex index_;  // group key -> group number
  std::vector<Group> groups_;
  std::vector<Entry> entries_;  // k_group_size per group; group numbers are reused
  std::vector<std::uint32_t> free_groups_;
  // The last group looked up: a sequence's calls walk its blocks in order, a run per group.
  mutable BlockHash last_key_ = 0;
  mutable std::uint32_t last_group_ = k_none;
  std::size_t cached_ = 0;
  std::uint32_t lru_oldest_ = k_none;
  std::uint32_t lru_newest_ = k_none;
  std::size_t lru_size_ = 0;
  std::uint64_t version_ = 0;
  std::uint64_t holding_version_ = 0;
  std::uint64_t sharing_version_ = 0;
};

}  // namespace exitsim::policy
