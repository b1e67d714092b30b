#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "exitsim/core/time.hpp"

namespace exitsim::sim {

// One prefill replica's link to the decode replicas: the transfers on it share its bandwidth
// equally (processor sharing), so two at once each take twice as long as one alone. A transfer
// joins after the link's latency; the caller schedules that.
class TransferLink {
 public:
  TransferLink(double bytes_per_second, TimeNs latency)
      : bytes_per_ns_(bytes_per_second / 1e9), latency_(latency) {}

  TimeNs latency() const { return latency_; }
  std::size_t active() const { return active_.size(); }
  // A transfer of `bytes` joins at `now`.
  void join(TimeNs now, std::size_t id, std::int64_t bytes);
  // When the next transfer finishes at the current sharing (nullopt: none active).
  std::optional<TimeNs> next_finish() const;
  // Advances to `now`; the ids of the transfers finished by then go to `done`.
  void finish_until(TimeNs now, std::vector<std::size_t>& done);
  // Bumped whenever next_finish() may have changed, so that stale events can be told apart.
  std::uint64_t version() const { return version_; }

 private:
  void advance(TimeNs now);

  struct Active {
    std::size_t id;
    double remaining;  // bytes
  };
  double bytes_per_ns_;
  TimeNs latency_;
  std::vector<Active> active_;
  TimeNs last_ = 0;
  std::uint64_t version_ = 0;
};

}  // namespace exitsim::sim
