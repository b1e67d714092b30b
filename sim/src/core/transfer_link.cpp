#include "transfer_link.hpp"

#include <algorithm>
#include <cmath>

namespace exitsim::sim {

void TransferLink::advance(TimeNs now) {
  if (!active_.empty() && now > last_) {
    const double moved =
        static_cast<double>(now - last_) * bytes_per_ns_ / static_cast<double>(active_.size());
    for (Active& a : active_)
      a.remaining -= moved;
  }
  last_ = now;
}

void TransferLink::join(TimeNs now, std::size_t id, std::int64_t bytes) {
  advance(now);
  active_.push_back({id, static_cast<double>(bytes)});
  ++version_;
}

std::optional<TimeNs> TransferLink::next_finish() const {
  if (active_.empty())
    return std::nullopt;
  double least = active_.front().remaining;
  for (const Active& a : active_)
    least = std::min(least, a.remaining);
  const double share = bytes_per_ns_ / static_cast<double>(active_.size());
  return last_ + static_cast<TimeNs>(std::ceil(std::max(least, 0.0) / share));
}

void TransferLink::finish_until(TimeNs now, std::vector<std::size_t>& done) {
  advance(now);
  // Within a nanosecond's share of the link: rounding, not bytes left.
  const double slack =
      bytes_per_ns_ / static_cast<double>(std::max<std::size_t>(active_.size(), 1));
  const auto finished = [&](const Active& a) { return a.remaining <= slack; };
  for (const Active& a : active_) {
    if (finished(a))
      done.push_back(a.id);
  }
  const auto before = active_.size();
  active_.erase(std::remove_if(active_.begin(), active_.end(), finished), active_.end());
  if (active_.size() != before)
    ++version_;
}

}  // namespace exitsim::sim
