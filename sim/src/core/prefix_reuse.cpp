#include "prefix_reuse.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace exitsim::sim {

std::size_t PrefixReuse::leading(const std::vector<policy::BlockHash>& hashes, std::size_t limit,
                                 std::uint32_t references, std::size_t hint) const {
  const auto holds = [&](std::size_t i) {
    const auto count = cache_.references(hashes[i]);
    return count && *count >= references;
  };
  // The blocks that hold form a prefix (see the class comment): its end lies in [low, high].
  std::size_t low = 0;
  std::size_t high = std::min(limit, hashes.size());
  if (hint != k_no_hint) {
    hint = std::min(hint, high);
    if (hint > 0 && !holds(hint - 1)) {
      high = hint - 1;  // below the hint: step down 1, 2, 4, ... blocks
      for (std::size_t step = 1; low < high; step *= 2) {
        const std::size_t probe = high - low > step ? high - step : low;
        if (holds(probe)) {
          low = probe + 1;
          break;
        }
        high = probe;
      }
    } else {
      low = hint;  // at or above it: step up
      for (std::size_t step = 1; low < high; step *= 2) {
        const std::size_t probe = high - low > step ? low + step - 1 : high - 1;
        if (!holds(probe)) {
          high = probe;
          break;
        }
        low = probe + 1;
      }
    }
  }
  // Bisect what is left.
  while (low < high) {
    const std::size_t mid = low + (high - low + 1) / 2;
    if (holds(mid - 1))
      low = mid;
    else
      high = mid - 1;
  }
  assert(hint == k_no_hint || low == leading(hashes, limit, references));
  return low;
}

void PrefixReuse::offer(policy::SequenceView& view, SequencePrefix& prefix,
                        std::uint64_t queue_key) {
  // A prompt that names no blocks never hits: its waiting view keeps nothing computed.
  if (!prefix.hashes)
    return;
  // A fresh watch has no earlier answers to start the searches from.
  const bool fresh = prefix.watch == k_no_watch;
  if (fresh) {
    prefix.watch = open_watch();
    watches_[prefix.watch].queue_key = queue_key;
  }
  // The prompt's last token runs whatever is cached: its logits give the first output token.
  const auto usable =
      static_cast<std::size_t>(std::max<std::int64_t>(view.prompt_tokens - 1, 0) / block_size_);
  if (!watches_[prefix.watch].stale) {
    // None of the blocks that could move it changed: the view holds what this would set.
    assert(prefix.offered == leading(*prefix.hashes, usable, 0));
    assert(view.kv_blocks ==
           static_cast<std::int64_t>(leading(*prefix.hashes, prefix.offered, 1)) * per_block_);
    return;
  }
  const std::size_t held_before = static_cast<std::size_t>(view.kv_blocks / per_block_);
  prefix.offered = leading(*prefix.hashes, usable, 0, fresh ? k_no_hint : prefix.offered);
  const std::size_t held =
      leading(*prefix.hashes, prefix.offered, 1, fresh ? k_no_hint : held_before);
  watch_blocks(prefix.watch, *prefix.hashes, usable, prefix.offered, held);
  view.computed_tokens = static_cast<std::int64_t>(prefix.offered) * block_size_;
  view.kv_blocks = static_cast<std::int64_t>(held) * per_block_;
  view.shared_blocks = view.kv_blocks;
}

void PrefixReuse::admit(policy::SequenceView& view, SequencePrefix& prefix) {
  prefix.waiting = false;
  close_watch(prefix);
  counts_.admitted_prompt_tokens += view.prompt_tokens;
  if (!prefix.hashes)
    return;
  const std::vector<policy::BlockHash>& hashes = *prefix.hashes;
  const std::size_t held =
      leading(hashes, prefix.offered, 1, static_cast<std::size_t>(view.kv_blocks / per_block_));
  view.kv_blocks = static_cast<std::int64_t>(held) * per_block_;
  view.shared_blocks = view.kv_blocks;
  for (std::size_t i = 0; i < prefix.offered; ++i) {
    if (cache_.acquire(hashes[i]))
      changed(hashes[i]);
  }
  prefix.referenced = prefix.offered;
  prefix.shared_at = ~std::uint64_t{0};
  counts_.hashed_blocks += static_cast<std::int64_t>(hashes.size());
  counts_.hit_blocks += static_cast<std::int64_t>(prefix.offered);
  counts_.hit_tokens += static_cast<std::int64_t>(prefix.offered) * block_size_;
  prefix.offered = 0;
}

void PrefixReuse::mark_shared(policy::SequenceView& view, SequencePrefix& prefix) const {
  if (prefix.referenced == 0) {
    view.shared_blocks = 0;
    return;
  }
  if (prefix.shared_at != cache_.sharing_version()) {
    // The previous count, unless the sequence's references changed since (then it is reset).
    const std::size_t hint = prefix.shared_at == ~std::uint64_t{0}
                                 ? k_no_hint
                                 : static_cast<std::size_t>(prefix.shared_blocks / per_block_);
    prefix.shared_at = cache_.sharing_version();
    prefix.shared_blocks =
        static_cast<std::int64_t>(leading(*prefix.hashes, prefix.referenced, 2, hint)) * per_block_;
  }
  view.shared_blocks = prefix.shared_blocks;
}

std::int64_t PrefixReuse::cache_filled(const policy::SequenceView& view, SequencePrefix& prefix) {
  // Without names, or with every named block referenced already (each decode step after the
  // prompt): nothing to cache.
  if (!prefix.hashes || prefix.referenced >= prefix.hashes->size())
    return 0;
  const std::vector<policy::BlockHash>& hashes = *prefix.hashes;
  const auto full =
      std::min(static_cast<std::size_t>(view.computed_tokens / block_size_), hashes.size());
  std::int64_t freed = 0;
  // Only an offer whose cached run ends just before a block watches an uncached block (and a
  // block's eviction renews the offers ending there): so of a run of blocks this call caches,
  // only the first can be watched.
  bool previous_inserted = false;
  for (std::size_t k = prefix.referenced; k < full; ++k) {
    const bool inserted = cache_.insert(hashes[k]);
    if (inserted) {
      if (!previous_inserted)
        changed(hashes[k]);
    } else if (cache_.acquire(hashes[k])) {
      changed(hashes[k]);
    } else {
      freed += per_block_;
    }
    previous_inserted = inserted;
    prefix.referenced = k + 1;
    prefix.shared_at = ~std::uint64_t{0};
  }
  return freed;
}

std::int64_t PrefixReuse::release(SequencePrefix& prefix) {
  if (prefix.referenced == 0)
    return 0;
  const std::vector<policy::BlockHash>& hashes = *prefix.hashes;
  const std::size_t freed = cache_.release(hashes, prefix.referenced);
  // Referenced blocks are a prefix of every chain, so those nobody holds now are the tail.
  for (std::size_t i = prefix.referenced; i-- > prefix.referenced - freed;) {
    assert(cache_.references(hashes[i]) == 0U);
    changed(hashes[i]);
  }
  prefix.referenced = 0;
  prefix.shared_at = ~std::uint64_t{0};
  return static_cast<std::int64_t>(freed) * per_block_;
}

void PrefixReuse::evict_for(std::int64_t free_blocks) {
  const auto unreferenced = static_cast<std::int64_t>(cache_.unreferenced_blocks()) * per_block_;
  if (free_blocks < unreferenced) {
    const std::int64_t short_by = unreferenced - free_blocks;
    evicted_.clear();
    counts_.evicted_blocks += static_cast<std::int64_t>(
        cache_.evict(static_cast<std::size_t>((short_by + per_block_ - 1) / per_block_), evicted_));
    for (const policy::BlockHash hash : evicted_)
      changed(hash);
  }
}

void PrefixReuse::take_stale(std::vector<std::uint64_t>& queue_keys) {
  // A watch closed since (its sequence admitted) is not stale; one reopened since is renewed.
  for (const std::uint32_t watch : newly_stale_) {
    if (watches_[watch].stale)
      queue_keys.push_back(watches_[watch].queue_key);
  }
  newly_stale_.clear();
}

std::uint32_t PrefixReuse::open_watch() {
  // A new watch is stale: its first offer computes.
  if (free_watches_.empty()) {
    watches_.emplace_back();
    return static_cast<std::uint32_t>(watches_.size() - 1);
  }
  const std::uint32_t watch = free_watches_.back();
  free_watches_.pop_back();
  watches_[watch].stale = true;
  return watch;
}

void PrefixReuse::close_watch(SequencePrefix& prefix) {
  if (prefix.watch == k_no_watch)
    return;
  Watch& watch = watches_[prefix.watch];
  watch.stale = false;  // nobody's offer to renew now
  ++watch.round;        // its watcher entries die with the round
  free_watches_.push_back(prefix.watch);
  prefix.watch = k_no_watch;
}

void PrefixReuse::watch_blocks(std::uint32_t watch, const std::vector<policy::BlockHash>& hashes,
                               std::size_t limit, std::size_t cached, std::size_t held) {
  Watch& w = watches_[watch];
  ++w.round;
  w.stale = false;
  if (cached < std::min(limit, hashes.size()))
    add_watcher(hashes[cached], watch);  // cached next: the hit grows
  if (cached > 0)
    add_watcher(hashes[cached - 1], watch);  // evicted: the hit shrinks
  if (held < cached && held != cached - 1)
    add_watcher(hashes[held], watch);  // referenced: one more block costs no free block
  if (held > 0 && held != cached)
    add_watcher(hashes[held - 1], watch);  // released by its last holder: one fewer
  if (watchers_.size() - free_watchers_.size() >= sweep_at_)
    sweep_watchers();
}

void PrefixReuse::add_watcher(policy::BlockHash hash, std::uint32_t watch) {
  std::uint32_t node = 0;
  if (free_watchers_.empty()) {
    node = static_cast<std::uint32_t>(watchers_.size());
    watchers_.emplace_back();
  } else {
    node = free_watchers_.back();
    free_watchers_.pop_back();
  }
  mark_watched(hash);
  std::uint32_t* head = watched_.find(hash);
  watchers_[node] = {watch, head != nullptr ? *head : policy::BlockHashIndex::k_none,
                     watches_[watch].round};
  if (head != nullptr)
    *head = node;
  else
    watched_.insert(hash, node);
}

void PrefixReuse::renew_watchers(policy::BlockHash hash) {
  const std::uint32_t* head = watched_.find(hash);
  if (head == nullptr)
    return;
  // Every watcher fires once: a live one's sequence recomputes and watches afresh.
  for (std::uint32_t node = *head; node != policy::BlockHashIndex::k_none;) {
    const Watcher& watcher = watchers_[node];
    if (alive(watcher)) {
      watches_[watcher.watch].stale = true;
      newly_stale_.push_back(watcher.watch);
    }
    free_watchers_.push_back(node);
    node = watcher.next;
  }
  watched_.erase(hash);
}

void PrefixReuse::sweep_watchers() {
  std::vector<policy::BlockHash> emptied;
  std::fill(watched_filter_.begin(), watched_filter_.end(), 0);
  watched_.for_each([&](policy::BlockHash hash, std::uint32_t& head) {
    std::uint32_t* link = &head;
    while (*link != policy::BlockHashIndex::k_none) {
      const std::uint32_t node = *link;
      if (alive(watchers_[node])) {
        link = &watchers_[node].next;
      } else {
        *link = watchers_[node].next;
        free_watchers_.push_back(node);
      }
    }
    if (head == policy::BlockHashIndex::k_none)
      emptied.push_back(hash);
    else
      mark_watched(hash);
  });
  for (const policy::BlockHash hash : emptied)
    watched_.erase(hash);
  sweep_at_ = std::max<std::size_t>(2 * (watchers_.size() - free_watchers_.size()), 1U << 16);
}

}  // namespace exitsim::sim
