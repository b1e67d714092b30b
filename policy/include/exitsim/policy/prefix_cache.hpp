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
    const std::uint32_t* at = index_.find(hash);
    return at == nullptr ? std::nullopt : std::optional<std::uint32_t>(entries_[*at].references);
  }
  std::size_t cached_blocks() const { return index_.size(); }
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
  // A cached block. The unreferenced ones form a doubly linked list through `older`/`newer`
  // (entry numbers), least recently released first.
  struct Entry {
    BlockHash hash = 0;
    std::uint32_t references = 0;
    std::uint32_t older = k_none;
    std::uint32_t newer = k_none;
  };
  Entry& entry_of(BlockHash hash, const char* caller);
  void lru_push_newest(std::uint32_t entry);
  void lru_unlink(std::uint32_t entry);

  BlockHashIndex index_;        // hash -> entry number
  std::vector<Entry> entries_;  // numbers are reused through free_entries_
  std::vector<std::uint32_t> free_entries_;
  std::uint32_t lru_oldest_ = k_none;
  std::uint32_t lru_newest_ = k_none;
  std::size_t lru_size_ = 0;
  std::uint64_t version_ = 0;
  std::uint64_t holding_version_ = 0;
  std::uint64_t sharing_version_ = 0;
};

}  // namespace exitsim::policy
