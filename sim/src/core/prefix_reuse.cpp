#include "prefix_reuse.hpp"

#include <algorithm>

namespace exitsim::sim {

std::size_t PrefixReuse::leading(const std::vector<policy::BlockHash>& hashes, std::size_t limit,
                                 std::uint32_t references) const {
  const auto holds = [&](std::size_t i) {
    const auto count = cache_.references(hashes[i]);
    return count && *count >= references;
  };
  // The blocks that hold form a prefix (see the class comment): bisect for its end.
  std::size_t low = 0;
  std::size_t high = std::min(limit, hashes.size());
  while (low < high) {
    const std::size_t mid = low + (high - low + 1) / 2;
    if (holds(mid - 1))
      low = mid;
    else
      high = mid - 1;
  }
  return low;
}

void PrefixReuse::offer(policy::SequenceView& view, SequencePrefix& prefix) const {
  // A prompt that names no blocks never hits: its waiting view keeps nothing computed.
  if (!prefix.hashes)
    return;
  if (prefix.offered_at == cache_.version() &&
      prefix.offered_holding_at == cache_.holding_version())
    return;  // the view holds what this would set
  prefix.offered_at = cache_.version();
  prefix.offered_holding_at = cache_.holding_version();
  prefix.offered = 0;
  view.computed_tokens = 0;
  view.kv_blocks = 0;
  view.shared_blocks = 0;
  // The prompt's last token runs whatever is cached: its logits give the first output token.
  const auto usable =
      static_cast<std::size_t>(std::max<std::int64_t>(view.prompt_tokens - 1, 0) / block_size_);
  prefix.offered = leading(*prefix.hashes, usable, 0);
  const std::size_t held = leading(*prefix.hashes, prefix.offered, 1);
  view.computed_tokens = static_cast<std::int64_t>(prefix.offered) * block_size_;
  view.kv_blocks = static_cast<std::int64_t>(held) * per_block_;
  view.shared_blocks = view.kv_blocks;
}

void PrefixReuse::admit(policy::SequenceView& view, SequencePrefix& prefix) {
  prefix.waiting = false;
  counts_.admitted_prompt_tokens += view.prompt_tokens;
  if (!prefix.hashes)
    return;
  const std::size_t held = leading(*prefix.hashes, prefix.offered, 1);
  view.kv_blocks = static_cast<std::int64_t>(held) * per_block_;
  view.shared_blocks = view.kv_blocks;
  cache_.acquire(*prefix.hashes, prefix.offered);
  prefix.referenced = prefix.offered;
  prefix.shared_at = ~std::uint64_t{0};
  counts_.hashed_blocks += static_cast<std::int64_t>(prefix.hashes->size());
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
    prefix.shared_at = cache_.sharing_version();
    prefix.shared_blocks =
        static_cast<std::int64_t>(leading(*prefix.hashes, prefix.referenced, 2)) * per_block_;
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
  for (std::size_t k = prefix.referenced; k < full; ++k) {
    // Cached meanwhile by another sequence: reference that block and free this one's copy
    // (unless the cached one was free itself: then the two trade places in the pool).
    if (!cache_.insert(hashes[k]))
      freed += cache_.acquire(hashes[k]) ? 0 : per_block_;
    prefix.referenced = k + 1;
    prefix.shared_at = ~std::uint64_t{0};
  }
  return freed;
}

std::int64_t PrefixReuse::release(SequencePrefix& prefix) {
  if (prefix.referenced == 0)
    return 0;
  const std::size_t freed = cache_.release(*prefix.hashes, prefix.referenced);
  prefix.referenced = 0;
  prefix.shared_at = ~std::uint64_t{0};
  return static_cast<std::int64_t>(freed) * per_block_;
}

void PrefixReuse::evict_for(std::int64_t free_blocks) {
  const auto unreferenced = static_cast<std::int64_t>(cache_.unreferenced_blocks()) * per_block_;
  if (free_blocks < unreferenced) {
    const std::int64_t short_by = unreferenced - free_blocks;
    counts_.evicted_blocks += static_cast<std::int64_t>(
        cache_.evict(static_cast<std::size_t>((short_by + per_block_ - 1) / per_block_)));
  }
}

}  // namespace exitsim::sim
