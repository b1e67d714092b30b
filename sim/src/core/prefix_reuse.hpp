#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exitsim/policy/block_hash_index.hpp"
#include "exitsim/policy/prefix_cache.hpp"
#include "exitsim/policy/scheduler.hpp"
#include "exitsim/sim/metrics/metrics.hpp"

namespace exitsim::sim {

inline constexpr std::uint32_t k_no_watch = ~std::uint32_t{0};

// A sequence's prompt blocks as prefix caching sees them.
struct SequencePrefix {
  // The scheduler blocks of the prompt's hashed prefix (policy::scheduler_block_hashes); null
  // when the request named none.
  std::shared_ptr<const std::vector<policy::BlockHash>> hashes;
  std::size_t referenced = 0;  // leading blocks it references in the cache
  std::size_t offered = 0;     // waiting: the blocks a hit gives it if admitted now
  bool waiting = true;         // not admitted since it last arrived in the waiting queue
  // Waiting: its slot in PrefixReuse's offer watches (k_no_watch until offer() first looks, and
  // again once admitted).
  std::uint32_t watch = k_no_watch;
  // The cache's sharing version when mark_shared() last looked (it skips a cache that has not
  // changed in what it reads); ~0 for never.
  std::uint64_t shared_at = ~std::uint64_t{0};
  std::int64_t shared_blocks = 0;
};

// The replica's side of prefix caching (policy::PrefixCache holds the blocks): offering hits to
// waiting sequences, taking them at admission, caching blocks as prompts fill them, releasing
// and evicting, and the pool accounting that sharing needs. The pool counts a cached block that
// nobody references as free; its physically empty blocks are the free ones minus those.
//
// Along one chain of hashes the cached blocks are always a prefix (a block's holders hold every
// block before it, and release them last to first, so a block is never forgotten before the
// blocks after it), and so are those with at least n references: lookups bisect.
//
// An offer depends on two counts, c cached leading blocks and h of them referenced. Because both
// runs are prefixes, only four blocks can move them: block c being cached, block c-1 evicted,
// block h referenced, block h-1 released by its last holder. Each waiting sequence watches those
// blocks, and offer() recomputes only a sequence one of them changed for. Under overload
// thousands wait and the cache changes every iteration: the work per change is then the
// sequences it concerns, not the whole queue.
class PrefixReuse {
 public:
  // `pool_blocks_per_block`: the pool's blocks one cached block of `block_size` tokens takes, one
  // per K/V instance (a layer with a cache of its own; policy/kv_layout.hpp). Every count this
  // class returns to the pool is in pool blocks.
  PrefixReuse(std::int64_t block_size, std::int64_t pool_blocks_per_block)
      : block_size_(block_size), per_block_(pool_blocks_per_block) {}

  // The hit a waiting sequence gets if admitted now: sets its computed tokens to the cached
  // blocks' (at most all but the prompt's last token, which must run to give logits), and its
  // kv_blocks and shared_blocks to those of them other sequences hold (they cost no free block).
  // `queue_key` names the sequence in its waiting queue (SequenceQueue::key) for take_stale().
  void offer(policy::SequenceView& view, SequencePrefix& prefix, std::uint64_t queue_key);
  // Appends the queue keys of the waiting sequences whose offers went stale since the last call
  // (a key may repeat): offer() changes nothing for the others, so under overload, with thousands
  // waiting and a few offers going stale per iteration, the replica renews only these.
  void take_stale(std::vector<std::uint64_t>& queue_keys);
  // At admission: references the offered blocks and counts the lookup. The view's kv_blocks
  // become those of them held by others now: an earlier admission in the same iteration may
  // have taken the rest out of the free pool since offer().
  void admit(policy::SequenceView& view, SequencePrefix& prefix);
  // A running sequence's blocks that others reference too.
  void mark_shared(policy::SequenceView& view, SequencePrefix& prefix) const;
  // After an iteration: caches the prompt blocks the sequence has filled. Returns the pool
  // blocks freed (a block someone else cached meanwhile replaces the sequence's own copy).
  std::int64_t cache_filled(const policy::SequenceView& view, SequencePrefix& prefix);
  // On finishing or preemption: drops the sequence's references. Returns the pool blocks that
  // went back to the free pool among those it referenced in the cache.
  std::int64_t release(SequencePrefix& prefix);
  // The pool blocks of the cached blocks a sequence references.
  std::int64_t referenced_pool_blocks(const SequencePrefix& prefix) const {
    return static_cast<std::int64_t>(prefix.referenced) * per_block_;
  }
  // Forgets least recently released blocks until the pool's free blocks (`free_blocks`, cached
  // ones included) cover the cached unreferenced ones.
  void evict_for(std::int64_t free_blocks);

  // How many leading `hashes` are cached.
  std::size_t cached(const std::vector<policy::BlockHash>& hashes) const {
    return leading(hashes, hashes.size(), 0);
  }
  const PrefixCacheSummary& counts() const { return counts_; }
  // Adds the prefill FLOPs a hit saved (priced by the replica's cost model).
  void add_saved_flops(double flops) { counts_.prefill_flops_saved += flops; }

 private:
  static constexpr std::size_t k_no_hint = ~std::size_t{0};
  // Leading blocks of `hashes` that are cached with at least `references` references. With a
  // `hint` (an earlier answer), the search gallops out from it: a waiting sequence's hashes are
  // cold, and an answer moves little between looks, so it reads a cache line or two of them
  // where bisecting the whole prompt missed the cache at every probe. The answer is the same.
  std::size_t leading(const std::vector<policy::BlockHash>& hashes, std::size_t limit,
                      std::uint32_t references, std::size_t hint = k_no_hint) const;

  // A waiting sequence's offer: whether it must be recomputed, and which round of watched blocks
  // is its current one (entries of earlier rounds, and of closed watches, are dead).
  struct Watch {
    std::uint64_t round = 0;
    std::uint64_t queue_key = 0;  // its sequence's
    bool stale = true;
  };
  // One block's watchers form a list of these, through `next` (node numbers).
  struct Watcher {
    std::uint32_t watch;
    std::uint32_t next;
    std::uint64_t round;
  };
  std::uint32_t open_watch();
  void close_watch(SequencePrefix& prefix);
  // Starts a new round for `watch`, watching the blocks that can move an offer of `cached`
  // leading blocks out of `limit`, `held` of them referenced (see the class comment).
  void watch_blocks(std::uint32_t watch, const std::vector<policy::BlockHash>& hashes,
                    std::size_t limit, std::size_t cached, std::size_t held);
  void add_watcher(policy::BlockHash hash, std::uint32_t watch);
  bool alive(const Watcher& watcher) const {
    const Watch& w = watches_[watcher.watch];
    return w.round == watcher.round && !w.stale;
  }
  // `hash` was cached or forgotten, or its references crossed between 0 and 1: the offers
  // watching it are stale.
  // Called for millions of blocks per replay, most of them unwatched: the filter test is inline.
  void changed(policy::BlockHash hash) {
    if (maybe_watched(hash))
      renew_watchers(hash);
  }
  void renew_watchers(policy::BlockHash hash);
  // Drops dead watchers (of closed watches and past rounds) once the nodes in use have doubled
  // since the last sweep: blocks that never change would otherwise keep them forever.
  void sweep_watchers();

  std::int64_t block_size_;
  std::int64_t per_block_;
  policy::PrefixCache cache_;
  PrefixCacheSummary counts_;
  std::vector<Watch> watches_;
  std::vector<std::uint32_t> newly_stale_;  // watches made stale since take_stale()
  std::vector<std::uint32_t> free_watches_;
  policy::BlockHashIndex watched_;  // block -> its first watcher node
  // A one-bit-per-bucket filter of watched_'s keys (set on watching, rebuilt by each sweep):
  // most changes concern blocks nobody watches, and a bit test in L1 turns them away before the
  // table lookup.
  static constexpr unsigned k_filter_bits = 18;
  std::vector<std::uint64_t> watched_filter_ =
      std::vector<std::uint64_t>((1U << k_filter_bits) / 64);
  static std::size_t filter_bit(policy::BlockHash hash) {
    return static_cast<std::size_t>((hash * 0xD6E8FEB86659FD93ULL) >> (64 - k_filter_bits));
  }
  bool maybe_watched(policy::BlockHash hash) const {
    const std::size_t bit = filter_bit(hash);
    return ((watched_filter_[bit / 64] >> (bit % 64)) & 1U) != 0;
  }
  void mark_watched(policy::BlockHash hash) {
    const std::size_t bit = filter_bit(hash);
    watched_filter_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  }
  std::vector<Watcher> watchers_;
  std::vector<std::uint32_t> free_watchers_;
  std::size_t sweep_at_ = 1U << 16;
  std::vector<policy::BlockHash> evicted_;  // evict_for's scratch
};

}  // namespace exitsim::sim
